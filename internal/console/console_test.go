package console

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func serve(h http.Handler, method, target string, header map[string]string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, target, nil)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func TestHandler(t *testing.T) {
	h := Handler()
	page := map[string]string{"Accept": "text/html"}
	tests := map[string]struct {
		method, target string
		header         map[string]string
		wantStatus     int
		wantType       string
		wantCSP        bool
	}{
		"the page":                {http.MethodGet, "/", page, 200, "text/html", true},
		"a client-side route":     {http.MethodGet, "/blocks/cb-1", page, 200, "text/html", true},
		"a block by name":         {http.MethodGet, "/blocks/llama%20eval", page, 200, "text/html", true},
		"a plan's page":           {http.MethodGet, "/plans/pretrain", page, 200, "text/html", true},
		"a filtered list":         {http.MethodGet, "/blocks?state=cancelled&sort=-start", page, 200, "text/html", true},
		"a module":                {http.MethodGet, "/pages/find.js", nil, 200, "text/javascript", false},
		"the stylesheet":          {http.MethodGet, "/style.css", nil, 200, "text/css", false},
		"HEAD of a module":        {http.MethodHead, "/app.js", nil, 200, "text/javascript", false},
		"a route, not for a page": {http.MethodGet, "/blocks", map[string]string{"Accept": "application/json"}, 404, "", false},
		"a missing file":          {http.MethodGet, "/missing.js", nil, 404, "", false},
		"a POST":                  {http.MethodPost, "/", page, 404, "", false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			rec := serve(h, tc.method, tc.target, tc.header)
			if rec.Code != tc.wantStatus || !strings.HasPrefix(rec.Header().Get("Content-Type"), tc.wantType) {
				t.Fatalf("%s %s: %d %s, want %d %s", tc.method, tc.target, rec.Code, rec.Header().Get("Content-Type"), tc.wantStatus, tc.wantType)
			}
			if rec.Header().Get("X-Content-Type-Options") != "nosniff" {
				t.Errorf("X-Content-Type-Options = %q, want nosniff", rec.Header().Get("X-Content-Type-Options"))
			}
			if got := rec.Header().Get("Content-Security-Policy"); (got == ContentSecurityPolicy) != tc.wantCSP {
				t.Errorf("Content-Security-Policy = %q, want it on pages only", got)
			}
		})
	}
}

func TestHandlerRevalidates(t *testing.T) {
	h := Handler()
	first := serve(h, http.MethodGet, "/app.js", nil)
	etag := first.Header().Get("ETag")
	if etag == "" || first.Header().Get("Cache-Control") != "no-cache" {
		t.Fatalf("ETag %q, Cache-Control %q; want a validator and no-cache", etag, first.Header().Get("Cache-Control"))
	}
	if again := serve(h, http.MethodGet, "/app.js", map[string]string{"If-None-Match": etag}); again.Code != http.StatusNotModified || again.Body.Len() != 0 {
		t.Errorf("with If-None-Match: %d and %d bytes, want 304 and none", again.Code, again.Body.Len())
	}
}

// TestNoInlineScriptOrStyle: the policy allows no inline script or style,
// so the page must carry none.
func TestNoInlineScriptOrStyle(t *testing.T) {
	body := serve(Handler(), http.MethodGet, "/", map[string]string{"Accept": "text/html"}).Body.String()
	for _, bad := range []string{"<script>", "<style", " style=", "onclick=", "javascript:"} {
		if strings.Contains(body, bad) {
			t.Errorf("index.html contains %q, which the Content-Security-Policy refuses", bad)
		}
	}
	if strings.Contains(ContentSecurityPolicy, "unsafe-") {
		t.Errorf("the policy allows %q", ContentSecurityPolicy)
	}
}

// TestNoHTMLParsing: the modules never parse a string as HTML, so a
// stored name or a job's output can only ever be text.
func TestNoHTMLParsing(t *testing.T) {
	h := Handler().(*handler)
	for name, a := range h.assets {
		if !strings.HasSuffix(name, ".js") {
			continue
		}
		for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "createContextualFragment", "DOMParser"} {
			if strings.Contains(string(a.body), bad) {
				t.Errorf("%s uses %s", name, bad)
			}
		}
	}
	if len(h.assets) < 10 {
		t.Fatalf("%d assets embedded, want the console's modules", len(h.assets))
	}
}
