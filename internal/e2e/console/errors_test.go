package console

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestBrowserErrorsAreSeen: what the console test counts as a browser
// error is seen — a console.error, an uncaught exception, and an inline
// script, which the console's Content-Security-Policy refuses to run.
func TestBrowserErrorsAreSeen(t *testing.T) {
	br := newBrowser(t)
	srv := startServer(t, t0, "")
	br.run(t, "opening the console", chromedp.Navigate(srv.url+"/"), chromedp.WaitVisible(chromedp.CSS("#token")))
	eval[bool](t, br, `console.error("boom"), setTimeout(() => { throw new Error("bang"); }), true`)
	eval[bool](t, br, `document.body.append(Object.assign(document.createElement("script"), {textContent: "window.ranInline = true"})), true`)
	want := []string{"boom", "bang", "Content Security Policy"}
	deadline := time.Now().Add(10 * time.Second)
	for {
		br.mu.Lock()
		seen := strings.Join(br.errors, "\n")
		br.mu.Unlock()
		missing := ""
		for _, w := range want {
			if !strings.Contains(seen, w) {
				missing = w
			}
		}
		if missing == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the browser's errors do not mention %q:\n%s", missing, seen)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if eval[bool](t, br, "window.ranInline === true") {
		t.Error("an inline script ran despite the Content-Security-Policy")
	}
}
