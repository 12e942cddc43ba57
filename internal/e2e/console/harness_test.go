// Package console tests capblock's web console end to end: the real
// capblock binary with a simulated clock, driven through headless
// Chromium with chromedp, with axe-core checking each page's
// accessibility and every browser console error failing the test.
package console

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"capblock/internal/testbin"
)

// chromiumPath is Debian's chromium, which .ci/run installs.
const chromiumPath = "/usr/bin/chromium"

//go:embed testdata/axe.min.js
var axeSource string

// server is a capblock serve process on a fresh database.
type server struct {
	url   string
	admin string // the first administrator's token
	dir   string
}

// startServer runs the capblock binary with a simulated clock at start,
// on the demo fleet or the fleet file given.
func startServer(t testing.TB, start time.Time, fleetFile string) *server {
	t.Helper()
	bin := testbin.Capblock(t)
	dir := t.TempDir()
	args := []string{"serve", "--db", filepath.Join(dir, "capblock.db"), "--listen", "127.0.0.1:0", "--sim-clock",
		"--sim-start", start.Format(time.RFC3339), "--rate-limit", "0", "--allow-unisolated-jobs"}
	if fleetFile != "" {
		args = append(args, "--fleet", fleetFile)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	url := testbin.Serve(t, cmd, 60*time.Second)
	tok, err := os.ReadFile(filepath.Join(dir, "admin.token"))
	if err != nil {
		t.Fatalf("reading the admin token: %v", err)
	}
	return &server{url: url, admin: strings.TrimSpace(string(tok)), dir: dir}
}

// call sends a request to the API with token and decodes the answer
// into out; it fails the test on a status other than want.
func (s *server) call(t testing.TB, token, method, path string, body, out any, want int) {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.url+path, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %d, want %d: %s", method, path, resp.StatusCode, want, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: decoding %s: %v", method, path, data, err)
		}
	}
}

// browser is a headless Chromium tab that records every console error,
// uncaught exception and error the browser logs (a failed load, a
// Content-Security-Policy violation).
type browser struct {
	ctx context.Context

	mu     sync.Mutex
	errors []string
}

// newBrowser starts Chromium, or skips the test when it is missing
// (fails under CI=true, where .ci/run installs it).
func newBrowser(t testing.TB) *browser {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("Chromium is missing at %s: .ci/run installs it (apt-get install chromium)", chromiumPath)
		}
		t.Skipf("Chromium is missing at %s: install it with apt-get install chromium to run the console tests", chromiumPath)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.WindowSize(1280, 800),
	)
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium refuses to run as root with its sandbox
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancelCtx(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting Chromium: %v", err)
	}
	b := &browser{ctx: ctx}
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() {
				b.mu.Lock()
				b.errors = append(b.errors, fmt.Sprintf("%s %s (%s:%d)", m.Type, m.Text, m.URL, m.Line+1))
				b.mu.Unlock()
			}
		}
	}()
	return b
}

// checkNoErrors fails the test with every error the browser reported.
func (b *browser) checkNoErrors(t testing.TB) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range b.errors {
		t.Errorf("browser error: %s", e)
	}
	b.errors = nil
}

// run runs actions in the tab, failing the test with what it was doing.
func (b *browser) run(t testing.TB, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// text is the text content of the first element matching the CSS
// selector sel.
func (b *browser) text(t testing.TB, sel string) string {
	t.Helper()
	return get(t, b, "reading "+sel, chromedp.TextContent(chromedp.CSS(sel)))
}

// get runs one action that returns a value.
func get[T any](t testing.TB, b *browser, what string, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// eval evaluates a JavaScript expression, awaiting it when it is a
// promise, and decodes its value.
func eval[T any](t testing.TB, b *browser, expr string) T {
	t.Helper()
	return get(t, b, "evaluating "+firstLine(expr), chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
}

// waitFor polls a JavaScript condition until it holds.
func (b *browser) waitFor(t testing.TB, what, cond string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !eval[bool](t, b, "Boolean("+cond+")") {
		if time.Now().After(deadline) {
			page := eval[string](t, b, "document.querySelector('main').innerText")
			t.Fatalf("waiting for %s (%s): not within 20s; the page reads:\n%s", what, cond, page)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// tabTo presses Tab until the element matching sel has the focus.
func (b *browser) tabTo(t testing.TB, sel string) {
	t.Helper()
	for range 40 {
		if eval[bool](t, b, fmt.Sprintf("document.activeElement !== null && document.activeElement.matches(%q)", sel)) {
			return
		}
		b.run(t, "pressing Tab", chromedp.KeyEvent(kb.Tab))
	}
	t.Fatalf("40 presses of Tab did not reach %s", sel)
}

// checkAccessibility runs axe-core on the page and fails on every
// serious or critical violation.
func (b *browser) checkAccessibility(t testing.TB, page string) {
	t.Helper()
	if !eval[bool](t, b, "typeof axe !== 'undefined'") {
		eval[bool](t, b, axeSource+";true")
	}
	violations := eval[[]string](t, b, `axe.run(document, {resultTypes: ["violations"]}).then(r => r.violations
		.filter(v => v.impact === "serious" || v.impact === "critical")
		.map(v => v.impact + " " + v.id + ": " + v.help + " at " + v.nodes.slice(0, 3).map(n => n.target.join(" ")).join(", ")))`)
	for _, v := range violations {
		t.Errorf("%s: accessibility: %s", page, v)
	}
}

// sizes are the viewports every page is shown at.
var sizes = []struct {
	name          string
	width, height int64
}{{"phone", 390, 844}, {"desktop", 1280, 800}}

// capture shows the page at each size, checks its accessibility there
// and saves a screenshot, scrolled to the element matching show when
// given: into docs/screenshots when CAPBLOCK_SCREENSHOTS=1, into the
// test's temporary directory otherwise. It leaves the tab at the desktop
// size.
func (b *browser) capture(t testing.TB, name, show string) {
	t.Helper()
	dir := t.TempDir()
	if os.Getenv("CAPBLOCK_SCREENSHOTS") == "1" {
		dir = filepath.Join("..", "..", "..", "docs", "screenshots")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range sizes {
		b.run(t, "resizing to "+s.name, chromedp.EmulateViewport(s.width, s.height))
		eval[bool](t, b, "new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))")
		b.checkAccessibility(t, fmt.Sprintf("%s at %dx%d", name, s.width, s.height))
		if show != "" {
			eval[bool](t, b, fmt.Sprintf("document.querySelector(%q).scrollIntoView(), true", show))
		}
		png := get(t, b, "taking a screenshot", chromedp.CaptureScreenshot())
		file := filepath.Join(dir, fmt.Sprintf("%s-%dx%d.png", name, s.width, s.height))
		if err := os.WriteFile(file, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + "…"
	}
	return s
}
