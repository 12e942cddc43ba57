package api

import (
	"net/http"
	"strings"
)

// withConsole sends to the web console the GET and HEAD requests that no
// API route takes and that are outside the API's own paths (/v1/, /aws):
// the API's routes keep precedence, its 404s and 405s stay problems, and
// every other method goes to the API's router as before.
func withConsole(mux *http.ServeMux, console http.Handler) http.Handler {
	if console == nil {
		return mux
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			if _, pattern := mux.Handler(r); pattern == "" && !apiPath(r.URL.Path) {
				console.ServeHTTP(w, r)
				return
			}
		}
		mux.ServeHTTP(w, r)
	})
}

// apiPath reports whether p is in the API's own namespace, where a path
// without a route is the API's 404, never a console page.
func apiPath(p string) bool {
	return strings.HasPrefix(p, "/v1/") || p == "/v1" || strings.HasPrefix(p, "/aws") || strings.HasPrefix(p, "/openapi")
}
