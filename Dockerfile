# capblock's image: one static binary on distroless, run as a user that is
# not root (deploy/kubernetes runs it; README, "Run capblock on
# Kubernetes").
#
#   docker build -t capblock .
#
# The binary is pure Go (SQLite included), so it needs no C library.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o /out/capblock ./cmd/capblock

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/capblock /capblock
USER 65532:65532
ENTRYPOINT ["/capblock"]
CMD ["serve", "--help"]
