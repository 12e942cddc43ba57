// Package console is capblock's web console: plain HTML, CSS and ES
// modules embedded in the binary and served beside the HTTP API, which
// they call with the signed-in user's token as the CLI does. Nothing is
// built or fetched at run time.
package console

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed static
var static embed.FS

// ContentSecurityPolicy allows only the console's own scripts, styles and
// API: no inline script or style, no other origin, no framing.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; font-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// asset is one embedded file, read once, with its validator.
type asset struct {
	body        []byte
	contentType string
	etag        string
}

// handler serves the embedded files, and index.html for the console's
// own routes (paths that name no file) to a browser asking for a page.
type handler struct {
	assets map[string]asset
	index  asset
}

// Handler returns the console's handler. A path that names no file is
// answered with index.html only for a GET or HEAD that accepts text/html
// (a browser loading a client-side route); anything else gets a plain
// 404, which the API's middleware turns into a problem.
func Handler() http.Handler {
	h := &handler{assets: map[string]asset{}}
	err := fs.WalkDir(static, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := static.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(body)
		ct := mime.TypeByExtension(path.Ext(p))
		if ct == "" {
			ct = "application/octet-stream"
		}
		h.assets[strings.TrimPrefix(p, "static")] = asset{body: body, contentType: ct, etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
		return nil
	})
	if err != nil {
		panic("console: reading the embedded files: " + err.Error()) // the embed is fixed at build time
	}
	h.index = h.assets["/index.html"]
	return h
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hdr := w.Header()
	hdr.Set("X-Content-Type-Options", "nosniff")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		http.NotFound(w, r)
		return
	}
	a, ok := h.assets[r.URL.Path]
	if r.URL.Path == "/index.html" || !ok {
		if !acceptsHTML(r) {
			http.NotFound(w, r)
			return
		}
		a = h.index
	}
	hdr.Set("Content-Type", a.contentType)
	hdr.Set("ETag", a.etag)
	// Files keep their names from one release to the next, so a browser
	// asks again each time and is answered 304 while they are the same.
	hdr.Set("Cache-Control", "no-cache")
	if strings.HasPrefix(a.contentType, "text/html") {
		hdr.Set("Content-Security-Policy", ContentSecurityPolicy)
		hdr.Set("Referrer-Policy", "no-referrer")
		hdr.Set("X-Frame-Options", "DENY")
	}
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(a.body))
}

// acceptsHTML reports whether the request asks for a page: its Accept
// names text/html.
func acceptsHTML(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		if strings.Contains(v, "text/html") {
			return true
		}
	}
	return false
}
