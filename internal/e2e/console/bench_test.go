package console

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// bigFleetYAML is 10,000 nodes of 8 GPUs: 5 zones × 4 GPU models × 10
// racks of 50 nodes, so the fleet calendar has 20 pools.
func bigFleetYAML() string {
	models := []struct{ model, price string }{{"H100", "98.32"}, {"A100", "40.96"}, {"L40S", "12.00"}, {"H200", "120.00"}}
	var b strings.Builder
	b.WriteString("currency: USD\ninstanceTypes:\n")
	for _, m := range models {
		fmt.Fprintf(&b, "  - {name: %s.8x, gpuModel: %s, gpusPerInstance: 8, onDemandPrice: %q}\n", strings.ToLower(m.model), m.model, m.price)
	}
	b.WriteString("zones:\n")
	for z := range 5 {
		fmt.Fprintf(&b, "  - name: zone-%d\n    racks:\n", z)
		for _, m := range models {
			for r := range 10 {
				fmt.Fprintf(&b, "      - name: z%d-%s-r%d\n        nodeGroups:\n          - {prefix: z%d-%s-r%d-, count: 50, gpuModel: %s, gpus: 8}\n",
					z, strings.ToLower(m.model), r, z, strings.ToLower(m.model), r, m.model)
			}
		}
	}
	return b.String()
}

// BenchmarkCalendarDraw measures, in headless Chromium, the console's
// fleet calendar of a 10,000-node fleet (20 pools, 8 weeks hourly) with
// 400 blocks booked, seen by an administrator (every block a bar):
// draw-ms is one draw of the whole canvas at the 8-week zoom
// (performance.now() around it, read from the canvas), first-ms the
// page's first calendar from navigation to the first draw done (the
// fetch of GET /v1/fleet-calendar included). With CAPBLOCK_SCREENSHOTS=1
// it saves the calendar into docs/screenshots.
func BenchmarkCalendarDraw(b *testing.B) {
	br := newBrowser(b)
	dir := b.TempDir()
	fleetFile := filepath.Join(dir, "fleet.yaml")
	if err := os.WriteFile(fleetFile, []byte(bigFleetYAML()), 0o644); err != nil {
		b.Fatal(err)
	}
	srv := startServer(b, t0, fleetFile)
	types := []string{"h100.8x", "a100.8x", "l40s.8x", "h200.8x"}
	for i := range 400 {
		start := t0.Add(time.Duration(1+(i*37)%1200) * time.Hour)
		q := url.Values{"instanceType": {types[i%4]}, "instanceCount": {strconv.Itoa(1 + i%16)}, "durationHours": {strconv.Itoa(12 + i%96)},
			"startAfter": {start.Format(time.RFC3339)}, "endBefore": {start.Add(8 * 7 * 24 * time.Hour).Format(time.RFC3339)},
			"zone": {fmt.Sprintf("zone-%d", i%5)}, "maxResults": {"1"}}
		var offers struct {
			Offerings []struct {
				OfferingID string `json:"offeringId"`
			} `json:"offerings"`
		}
		srv.call(b, srv.admin, "GET", "/v1/offerings?"+q.Encode(), nil, &offers, 200)
		if len(offers.Offerings) == 0 {
			continue
		}
		srv.call(b, srv.admin, "POST", "/v1/blocks", map[string]any{"offeringId": offers.Offerings[0].OfferingID, "clientToken": fmt.Sprintf("seed-%d", i)}, nil, 201)
	}
	br.run(b, "signing in", chromedp.Navigate(srv.url+"/"), chromedp.WaitVisible(chromedp.CSS("#token")))
	eval[bool](b, br, fmt.Sprintf("sessionStorage.setItem('capblock.token', %q), true", srv.admin))
	started := time.Now()
	br.run(b, "opening the calendar", chromedp.Navigate(srv.url+"/calendar"))
	br.waitFor(b, "the first draw", `document.querySelector("#heatmap[data-draw-ms]")`)
	first := time.Since(started)
	if pools := eval[int](b, br, `fetch("/v1/fleet-calendar", {headers: {Authorization: "Bearer " + sessionStorage.getItem("capblock.token")}}).then(r => r.json()).then(c => c.pools.length)`); pools != 20 {
		b.Fatalf("the calendar has %d pools, want 20", pools)
	}
	var draws []float64
	b.ResetTimer()
	for b.Loop() {
		ms := eval[string](b, br, `window.dispatchEvent(new Event("resize")), document.querySelector("#heatmap").dataset.drawMs`)
		v, err := strconv.ParseFloat(ms, 64)
		if err != nil {
			b.Fatalf("draw time %q: %v", ms, err)
		}
		draws = append(draws, v)
	}
	b.StopTimer()
	slices.Sort(draws)
	b.ReportMetric(draws[len(draws)/2], "draw-ms-p50")
	b.ReportMetric(draws[len(draws)-1], "draw-ms-max")
	b.ReportMetric(float64(first.Milliseconds()), "first-ms")
	if os.Getenv("CAPBLOCK_SCREENSHOTS") == "1" {
		png := get(b, br, "taking a screenshot", chromedp.CaptureScreenshot())
		if err := os.WriteFile(filepath.Join("..", "..", "..", "docs", "screenshots", "calendar-10000-nodes-1280x800.png"), png, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	br.checkNoErrors(b)
}
