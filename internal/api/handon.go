package api

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"capblock/internal/contract"
	"capblock/internal/core"
)

// registerHandOn declares handing a block's hours on (transfer, release
// for resale) and the utilisation report.
func (s *server) registerHandOn(api huma.API) {
	huma.Register(api, s.operation("transferBlock", http.MethodPost, "/v1/blocks/{id}/transfer", "blocks",
		"Transfer a block (before its start) or the rest of it (from the next whole hour) to another team, where the fleet's policy allows"), s.transferBlock)
	huma.Register(api, s.operation("releaseBlock", http.MethodPost, "/v1/blocks/{id}/release", "blocks",
		"Release a block (before its start) or the rest of it (from the next whole hour) for resale; credited for what is resold, less the resale fee"), s.releaseBlock)
	huma.Register(api, s.operation("setBlockLending", http.MethodPost, "/v1/blocks/{id}/lending", "blocks",
		"Lend a block's GPUs to backfill (preemptible jobs) while running no job on them, credited a share of their spot price; or stop lending"), s.setLending)
	huma.Register(api, s.operation("getUtilisation", http.MethodGet, "/v1/utilisation", "teams",
		"GPU-hours reserved, used by the holder's jobs, lent to backfill and idle, per block, plan and team"), s.utilisation)
}

type gpuHoursJSON struct {
	Reserved float64 `json:"reserved" doc:"GPU-hours held over the hours elapsed."`
	Used     float64 `json:"used" doc:"GPU-hours the holder's jobs ran on."`
	Lent     float64 `json:"lent" doc:"GPU-hours of the holder's lent GPUs that ran backfill (counted as each run ends)."`
	Idle     float64 `json:"idle" doc:"Reserved less used and lent."`
}

func toGPUHours(g contract.GPUHours) gpuHoursJSON {
	return gpuHoursJSON{Reserved: g.Reserved, Used: g.Used, Lent: g.Lent, Idle: g.Idle}
}

type handoverJSON struct {
	ID             string    `json:"id" example:"ho-01HZX"`
	Kind           string    `json:"kind" enum:"transfer,release"`
	BlockID        string    `json:"blockId,omitempty" doc:"The block whose hours were handed on (shown to its team)."`
	Team           string    `json:"team" doc:"The team that handed the hours on."`
	ToTeam         string    `json:"toTeam,omitempty" doc:"The receiving team of a transfer."`
	ToBlockID      string    `json:"toBlockId,omitempty" doc:"The block the receiving team got."`
	From           time.Time `json:"from" doc:"The first hour handed on."`
	Until          time.Time `json:"until"`
	GPUHours       int64     `json:"gpuHours" doc:"GPU-hours handed on."`
	Price          moneyJSON `json:"price" doc:"A transfer's price, charged to the receiver and credited to the holder."`
	ResaleFeePct   int       `json:"resaleFeePercent" doc:"A release: the share of resold hours the operator keeps."`
	ResoldGPUHours int64     `json:"resoldGpuHours" doc:"A release: GPU-hours bought again so far."`
	Credited       moneyJSON `json:"credited" doc:"A release: what the holder was credited so far."`
	CreatedAt      time.Time `json:"createdAt"`
}

func toHandover(h contract.Handover) handoverJSON {
	return handoverJSON{ID: h.ID, Kind: h.Kind, BlockID: h.BlockID, Team: h.Team, ToTeam: h.ToTeam, ToBlockID: h.ToBlockID,
		From: h.From.UTC(), Until: h.Until.UTC(), GPUHours: h.GPUHours, Price: toMoney(h.Price), ResaleFeePct: h.FeePercent,
		ResoldGPUHours: h.ResoldGPUHours, Credited: toMoney(h.Credited), CreatedAt: h.CreatedAt.UTC()}
}

// blockDetailJSON is a block as GET /v1/blocks/{id} shows it: with its
// hand-overs and its utilisation so far.
type blockDetailJSON struct {
	blockJSON
	Handovers   []handoverJSON `json:"handovers" nullable:"false" doc:"Hours this block handed on, or received."`
	Utilisation gpuHoursJSON   `json:"utilisation"`
}

func (s *server) getBlock(ctx context.Context, in *blockIDInput) (*out[blockDetailJSON], error) {
	b, err := s.svc.GetBlock(ctx, scopeOf(ctx), in.ID)
	if err != nil {
		return nil, serviceProblem(ctx, err)
	}
	d, err := s.svc.BlockDetail(ctx, scopeOf(ctx), in.ID)
	if err != nil {
		return nil, serviceProblem(ctx, err)
	}
	resp := blockDetailJSON{blockJSON: toBlock(b), Handovers: make([]handoverJSON, 0, len(d.Handovers)), Utilisation: toGPUHours(d.Utilisation)}
	for _, h := range d.Handovers {
		resp.Handovers = append(resp.Handovers, toHandover(h))
	}
	return reply(resp)
}

type handOnJSON struct {
	Block    blockJSON    `json:"block" doc:"The holder's block as it is now: ending at the hand-over, or cancelled when nothing was kept."`
	Received *blockJSON   `json:"received,omitempty" doc:"The block the receiving team got (a transfer)."`
	Handover handoverJSON `json:"handover"`
}

func toHandOn(r contract.HandOnResult) handOnJSON {
	out := handOnJSON{Block: toBlock(r.Block), Handover: toHandover(r.Handover)}
	if r.Received != nil {
		recv := toBlock(*r.Received)
		out.Received = &recv
	}
	return out
}

type transferRequestJSON struct {
	Team  string `json:"team" minLength:"1" maxLength:"64" doc:"The receiving team (its id)."`
	Price string `json:"price,omitempty" maxLength:"32" example:"500.00" doc:"Charged to the receiving team and credited to the holder, in the fleet's currency; nothing when absent."`
}

type transferInput struct {
	ID   string `path:"id" doc:"Block id."`
	Body transferRequestJSON
}

func (s *server) transferBlock(ctx context.Context, in *transferInput) (*out[handOnJSON], error) {
	req := contract.TransferRequest{Scope: scopeOf(ctx), BlockID: in.ID, ToTeam: in.Body.Team}
	if in.Body.Price != "" {
		f, err := s.svc.Fleet(ctx)
		if err != nil {
			return nil, serviceProblem(ctx, err)
		}
		price, err := core.ParseMoney(in.Body.Price, f.Currency)
		if err != nil {
			return nil, invalid("body.price: %v", err)
		}
		req.Price = price
	}
	r, err := s.svc.TransferBlock(ctx, req)
	if err != nil {
		return nil, serviceProblem(ctx, err)
	}
	return reply(toHandOn(r))
}

func (s *server) releaseBlock(ctx context.Context, in *blockIDInput) (*out[handOnJSON], error) {
	r, err := s.svc.ReleaseBlock(ctx, scopeOf(ctx), in.ID)
	if err != nil {
		return nil, serviceProblem(ctx, err)
	}
	return reply(toHandOn(r))
}

type utilisationInput struct {
	Team string `query:"team" maxLength:"64" doc:"One team (its id); every team in scope when empty."`
	From string `query:"from" format:"date-time" doc:"Start of the window (RFC 3339); the beginning when empty."`
	To   string `query:"to" format:"date-time" doc:"End of the window (RFC 3339); now when empty."`
}

func (in *utilisationInput) Resolve(huma.Context) []error {
	return checkRange("query.to", "to", in.From, in.To, "from")
}

type utilisationRowJSON struct {
	Team         string       `json:"team,omitempty"`
	BlockID      string       `json:"blockId,omitempty"`
	PlanID       string       `json:"planId,omitempty"`
	InstanceType string       `json:"instanceType,omitempty"`
	GPUHours     gpuHoursJSON `json:"gpuHours"`
}

type utilisationJSON struct {
	Blocks []utilisationRowJSON `json:"blocks" nullable:"false"`
	Plans  []utilisationRowJSON `json:"plans" nullable:"false"`
	Teams  []utilisationRowJSON `json:"teams" nullable:"false"`
	Total  gpuHoursJSON         `json:"total"`
}

func (s *server) utilisation(ctx context.Context, in *utilisationInput) (*out[utilisationJSON], error) {
	rep, err := s.svc.Utilisation(ctx, scopeOf(ctx), in.Team, parseTime(in.From), parseTime(in.To))
	if err != nil {
		return nil, serviceProblem(ctx, err)
	}
	rows := func(rs []contract.UtilisationRow) []utilisationRowJSON {
		out := make([]utilisationRowJSON, 0, len(rs))
		for _, r := range rs {
			out = append(out, utilisationRowJSON{Team: r.Team, BlockID: r.BlockID, PlanID: r.PlanID, InstanceType: r.InstanceType, GPUHours: toGPUHours(r.GPUHours)})
		}
		return out
	}
	return reply(utilisationJSON{Blocks: rows(rep.Blocks), Plans: rows(rep.Plans), Teams: rows(rep.Teams), Total: toGPUHours(rep.Total)})
}

type lendingInput struct {
	ID   string `path:"id" doc:"Block id."`
	Body struct {
		Enabled bool `json:"enabled" doc:"Lend the block's idle GPUs (true) or stop (false). A job of yours on a lending block starts once the backfill there is gone, within the fleet's backfillNotice."`
	}
}

func (s *server) setLending(ctx context.Context, in *lendingInput) (*out[blockJSON], error) {
	b, err := s.svc.SetLending(ctx, scopeOf(ctx), in.ID, in.Body.Enabled)
	if err != nil {
		return nil, serviceProblem(ctx, err)
	}
	return reply(toBlock(b))
}
