package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metricsql"
	"github.com/goccy/go-yaml"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"capblock/internal/client"
	"capblock/internal/testbin"
)

// promtoolVersion is the promtool that scripts/promtool.sh builds and
// caches when none is given; the two must name the same.
const promtoolVersion = "v0.316.0"

const (
	rulesFile     = "prometheus/capblock-alerts.yml"
	rulesTestFile = "prometheus/capblock-alerts.test.yml"
	dashboardFile = "grafana/capblock-dashboard.json"
	runbookFile   = "../docs/runbook.md"
)

// promtool finds promtool: $CAPBLOCK_PROMTOOL (which .ci/run sets from
// scripts/promtool.sh), promtool on PATH, or the one the script cached.
// Without one the test skips, or fails under CI=true.
func promtool(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CAPBLOCK_PROMTOOL"); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("CAPBLOCK_PROMTOOL=%s: %v", p, err)
		}
		return p
	}
	if p, err := exec.LookPath("promtool"); err == nil {
		return p
	}
	cache := os.Getenv("CAPBLOCK_CACHE")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache", "capblock")
	}
	if p := filepath.Join(cache, "promtool", promtoolVersion, "promtool"); isExecutable(p) {
		return p
	}
	msg := "no promtool: run scripts/promtool.sh (builds promtool " + promtoolVersion + " into the cache), or set CAPBLOCK_PROMTOOL"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// runPromtool runs promtool with args in dir and returns its output,
// failing the test when it exits non-zero.
func runPromtool(t *testing.T, bin, dir string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestAlertRulesPromtool checks the rules with `promtool check rules`
// (PromQL, templates, structure) and runs their unit tests with
// `promtool test rules`.
func TestAlertRulesPromtool(t *testing.T) {
	bin := promtool(t)
	out := runPromtool(t, bin, "prometheus", "check", "rules", filepath.Base(rulesFile))
	t.Logf("promtool check rules:\n%s", out)
	out = runPromtool(t, bin, "prometheus", "test", "rules", filepath.Base(rulesTestFile))
	t.Logf("promtool test rules:\n%s", out)
}

// ruleFile is the part of a Prometheus rule file that the checks read.
type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Record      string            `yaml:"record"`
			Expr        string            `yaml:"expr"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

func readRules(t *testing.T, path string) ruleFile {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f ruleFile
	if err := yaml.Unmarshal(data, &f); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return f
}

// TestAlertRulesDocumented: every alert has a severity, a summary, a
// description and a runbook_url naming a section of docs/runbook.md, and
// its unit tests hold a case where it fires and one where it stays quiet.
func TestAlertRulesDocumented(t *testing.T) {
	rules := readRules(t, rulesFile)
	runbook, err := os.ReadFile(runbookFile)
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^## (\S+)$`).FindAllStringSubmatch(string(runbook), -1) {
		anchors[strings.ToLower(m[1])] = true
	}
	var tests struct {
		Tests []struct {
			Name          string `yaml:"name"`
			AlertRuleTest []struct {
				Alertname string           `yaml:"alertname"`
				ExpAlerts []map[string]any `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	data, err := os.ReadFile(rulesTestFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &tests); err != nil {
		t.Fatalf("%s: %v", rulesTestFile, err)
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				quiet[a.Alertname] = true
			}
		}
	}
	alerts := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			alerts++
			if s := r.Labels["severity"]; s != "critical" && s != "warning" {
				t.Errorf("%s: severity %q, want critical or warning", r.Alert, s)
			}
			for _, k := range []string{"summary", "description", "runbook_url"} {
				if strings.TrimSpace(r.Annotations[k]) == "" {
					t.Errorf("%s: no %s annotation", r.Alert, k)
				}
			}
			if want := "docs/runbook.md#" + strings.ToLower(r.Alert); r.Annotations["runbook_url"] != want {
				t.Errorf("%s: runbook_url %q, want %q", r.Alert, r.Annotations["runbook_url"], want)
			}
			if !anchors[strings.ToLower(r.Alert)] {
				t.Errorf("%s: docs/runbook.md has no section \"## %s\"", r.Alert, r.Alert)
			}
			if !fires[r.Alert] {
				t.Errorf("%s: no unit test where it fires", r.Alert)
			}
			if !quiet[r.Alert] {
				t.Errorf("%s: no unit test where it stays quiet", r.Alert)
			}
		}
	}
	if alerts < 8 {
		t.Errorf("%s has %d alerts, want at least 8", rulesFile, alerts)
	}
}

// dashboard is the part of a Grafana dashboard that the checks read.
type dashboard struct {
	Inputs []struct {
		Name     string `json:"name"`
		Type     string `json:"type"`
		PluginID string `json:"pluginId"`
	} `json:"__inputs"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []panel `json:"panels"`
	Templating    struct {
		List []struct {
			Name       string          `json:"name"`
			Datasource datasource      `json:"datasource"`
			Definition string          `json:"definition"`
			Query      json.RawMessage `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	Title      string      `json:"title"`
	Type       string      `json:"type"`
	Datasource *datasource `json:"datasource"`
	Targets    []struct {
		Expr       string      `json:"expr"`
		Datasource *datasource `json:"datasource"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a collapsed row's
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	data, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d
}

func (d dashboard) allPanels() []panel {
	var out []panel
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			out = append(out, p)
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out
}

// TestDashboard: the dashboard takes its Prometheus as the input
// DS_PROMETHEUS, every panel and query uses it, and it has the panels an
// operator of the fleet looks at.
func TestDashboard(t *testing.T) {
	d := readDashboard(t)
	if len(d.Inputs) != 1 || d.Inputs[0].Name != "DS_PROMETHEUS" || d.Inputs[0].Type != "datasource" || d.Inputs[0].PluginID != "prometheus" {
		t.Errorf("__inputs = %+v, want the one datasource input DS_PROMETHEUS of plugin prometheus", d.Inputs)
	}
	if d.SchemaVersion < 39 {
		t.Errorf("schemaVersion %d, want 39 or later", d.SchemaVersion)
	}
	want := datasource{Type: "prometheus", UID: "${DS_PROMETHEUS}"}
	var titles []string
	for _, p := range d.allPanels() {
		if p.Type == "row" {
			continue
		}
		titles = append(titles, p.Title)
		if p.Datasource == nil || *p.Datasource != want {
			t.Errorf("panel %q: datasource %+v, want %+v", p.Title, p.Datasource, want)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			if tg.Datasource == nil || *tg.Datasource != want {
				t.Errorf("panel %q: a query's datasource %+v, want %+v", p.Title, tg.Datasource, want)
			}
			if strings.TrimSpace(tg.Expr) == "" {
				t.Errorf("panel %q: a query with no expr", p.Title)
			}
		}
	}
	for _, v := range d.Templating.List {
		if v.Datasource != want {
			t.Errorf("variable %s: datasource %+v, want %+v", v.Name, v.Datasource, want)
		}
	}
	for _, w := range []string{"Booked share by GPU model and zone", "Purchases per second", "Refusals by reason",
		"Utilisation by team", "Engine actions", "Request latency p50 / p99", "Nodes unhealthy"} {
		if !slices.Contains(titles, w) {
			t.Errorf("no panel %q (panels: %q)", w, titles)
		}
	}
}

// TestDashboardPromtool checks every dashboard query as PromQL with
// promtool, as the expressions of recording rules (Grafana's variables
// replaced by what they stand for).
func TestDashboardPromtool(t *testing.T) {
	bin := promtool(t)
	var b strings.Builder
	b.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	for i, q := range dashboardQueries(t, readDashboard(t)) {
		if q.labelValues {
			continue // not PromQL: Grafana's label_values(); its selector is checked below
		}
		expr, err := json.Marshal(q.expr) // a JSON string is a YAML string
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "      - record: dashboard:query_%d\n        expr: %s\n", i, expr)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "dashboard.yml"), []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	runPromtool(t, bin, dir, "check", "rules", "dashboard.yml")
}

// query is one PromQL expression of the rules or of the dashboard, and
// where it is.
type query struct {
	where, expr string
	// labelValues: expr is the selector of a Grafana label_values()
	// whose label is label.
	labelValues bool
	label       string
}

func ruleQueries(t *testing.T, path string) []query {
	t.Helper()
	var out []query
	for _, g := range readRules(t, path).Groups {
		for _, r := range g.Rules {
			out = append(out, query{where: path + ": " + r.Alert + r.Record, expr: r.Expr})
		}
	}
	return out
}

// grafanaVar is a dashboard variable in a query: $name or ${name}.
var grafanaVar = regexp.MustCompile(`\$\{?(\w+)\}?`)

// labelValuesQuery is Grafana's label_values(selector, label).
var labelValuesQuery = regexp.MustCompile(`^\s*label_values\((.*),\s*(\w+)\s*\)\s*$`)

// dashboardQueries returns the panels' queries and the variables'
// selectors, with Grafana's variables replaced: the intervals by a
// duration, the dashboard's own by a value.
func dashboardQueries(t *testing.T, d dashboard) []query {
	t.Helper()
	expand := func(s string) string {
		return grafanaVar.ReplaceAllStringFunc(s, func(v string) string {
			switch strings.Trim(v, "${}") {
			case "__rate_interval", "__interval", "__range":
				return "5m"
			}
			return "x"
		})
	}
	var out []query
	for _, p := range d.allPanels() {
		for _, tg := range p.Targets {
			out = append(out, query{where: fmt.Sprintf("%s: panel %q", dashboardFile, p.Title), expr: expand(tg.Expr)})
		}
	}
	for _, v := range d.Templating.List {
		q := v.Definition
		var obj struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &obj); err == nil && obj.Query != "" {
			q = obj.Query
		} else if s := ""; json.Unmarshal(v.Query, &s) == nil && s != "" {
			q = s
		}
		m := labelValuesQuery.FindStringSubmatch(q)
		if m == nil {
			t.Fatalf("variable %s: query %q is not label_values(selector, label)", v.Name, q)
		}
		out = append(out, query{where: fmt.Sprintf("%s: variable %s", dashboardFile, v.Name), expr: expand(m[1]), labelValues: true, label: m[2]})
	}
	return out
}

// selector is a series selector of a query: the metric it names and the
// labels it matches on.
type selector struct {
	metric string
	labels []string
}

// selectors parses expr as PromQL and returns its series selectors. A
// selector that does not name its metric exactly is an error: it could
// not be checked.
func selectors(expr string) ([]selector, error) {
	e, err := metricsql.Parse(expr)
	if err != nil {
		return nil, fmt.Errorf("parsing %q: %w", expr, err)
	}
	var out []selector
	metricsql.VisitAll(e, func(x metricsql.Expr) {
		me, ok := x.(*metricsql.MetricExpr)
		if !ok {
			return
		}
		for _, lfs := range me.LabelFilterss {
			var s selector
			for _, lf := range lfs {
				switch {
				case lf.Label == "__name__" && !lf.IsRegexp && !lf.IsNegative:
					s.metric = lf.Value
				case lf.Label == "__name__":
					err = fmt.Errorf("%q: a selector matches the metric name by a pattern, which cannot be checked", expr)
				default:
					s.labels = append(s.labels, lf.Label)
				}
			}
			if s.metric == "" && err == nil {
				err = fmt.Errorf("%q: a selector names no metric", expr)
			}
			out = append(out, s)
		}
	})
	return out, err
}

// served are the series names a /metrics page holds, each with the label
// names of its samples: a histogram's _bucket (with le), _sum and
// _count, a summary's quantiles, _sum and _count.
type served map[string]map[string]bool

func parseMetrics(page string) (served, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(page))
	if err != nil {
		return nil, fmt.Errorf("parsing /metrics: %w", err)
	}
	out := served{}
	add := func(name string, m *dto.Metric, extra ...string) {
		if out[name] == nil {
			out[name] = map[string]bool{}
		}
		for _, l := range m.GetLabel() {
			out[name][l.GetName()] = true
		}
		for _, l := range extra {
			out[name][l] = true
		}
	}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			switch f.GetType() {
			case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
				add(name+"_bucket", m, "le")
				add(name+"_sum", m)
				add(name+"_count", m)
			case dto.MetricType_SUMMARY:
				add(name, m, "quantile")
				add(name+"_sum", m)
				add(name+"_count", m)
			default:
				add(name, m)
			}
		}
	}
	return out, nil
}

// unknownSeries returns what the queries name that the page does not
// serve: a metric, or a label of a metric that no sample of it carries.
// Series that Prometheus makes itself (up, ALERTS) are not capblock's to
// serve and are left alone.
func unknownSeries(qs []query, page served) []string {
	var out []string
	for _, q := range qs {
		sels, err := selectors(q.expr)
		if err != nil {
			out = append(out, q.where+": "+err.Error())
			continue
		}
		if len(sels) == 0 {
			out = append(out, fmt.Sprintf("%s: %q names no series", q.where, q.expr))
		}
		for _, s := range sels {
			if s.metric == "up" || s.metric == "ALERTS" || s.metric == "ALERTS_FOR_STATE" {
				continue
			}
			labels, ok := page[s.metric]
			if !ok {
				out = append(out, fmt.Sprintf("%s: %s is not served at /metrics", q.where, s.metric))
				continue
			}
			want := s.labels
			if q.labelValues {
				want = append(slices.Clone(want), q.label)
			}
			for _, l := range want {
				if !labels[l] {
					out = append(out, fmt.Sprintf("%s: %s has no label %s", q.where, s.metric, l))
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// TestQueriesNameServedSeries starts `capblock serve` (the demo fleet, a
// fresh SQLite file, the sim backend), makes it do what puts every
// series on /metrics (a search, a purchase, a refused purchase, an hour
// of the block, a failed node), scrapes /metrics and checks that every
// series the alerting rules and the dashboard's queries name is served,
// with the labels they match on.
func TestQueriesNameServedSeries(t *testing.T) {
	if testing.Short() {
		t.Skip("builds capblock and runs it")
	}
	// 1. The server, as a process.
	dir := t.TempDir()
	cmd := exec.Command(testbin.Capblock(t), "serve", "--db", filepath.Join(dir, "capblock.db"), "--listen", "127.0.0.1:0",
		"--sim-clock", "--rate-limit", "0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	url := testbin.Serve(t, cmd, 60*time.Second)
	token, err := os.ReadFile(filepath.Join(dir, "admin.token"))
	if err != nil {
		t.Fatalf("reading the admin token: %v", err)
	}
	api, err := client.New(url, client.WithToken(strings.TrimSpace(string(token))))
	if err != nil {
		t.Fatal(err)
	}

	// 2. A purchase, a refused one, the block's first hour, a failed node.
	ctx := t.Context()
	now, err := api.Now(ctx)
	if err != nil {
		t.Fatal(err)
	}
	offs, err := api.Offerings(ctx, client.OfferingsQuery{InstanceTypes: []string{"h100.8x"}, InstanceCount: 1, DurationHours: 4,
		StartAfter: now, EndBefore: now.Add(48 * time.Hour)})
	if err != nil || len(offs) == 0 {
		t.Fatalf("searching: %v %v", offs, err)
	}
	b, err := api.Buy(ctx, client.BuyRequest{OfferingID: offs[0].OfferingID, ClientToken: "deploy-test-1"})
	if err != nil {
		t.Fatalf("buying: %v", err)
	}
	if _, err := api.Buy(ctx, client.BuyRequest{OfferingID: "cbo-not-a-quote", ClientToken: "deploy-test-2"}); err == nil {
		t.Fatal("a purchase of no offering succeeded")
	}
	// An hour into the block: its team's GPU-hours are reported.
	if _, err := api.AdvanceClock(ctx, b.StartTime.Sub(now)+time.Hour); err != nil {
		t.Fatalf("moving the simulated clock: %v", err)
	}
	nodes, err := api.Nodes(ctx)
	if err != nil || len(nodes) == 0 {
		t.Fatalf("listing the nodes: %v %v", nodes, err)
	}
	if _, err := api.FailNode(ctx, nodes[len(nodes)-1].Name, "deploy test"); err != nil {
		t.Fatalf("failing a node: %v", err)
	}

	// 3. Scrape.
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s %v", resp.Status, err)
	}
	body := string(raw)
	metrics, err := parseMetrics(body)
	if err != nil {
		t.Fatal(err)
	}
	// The scrape holds what the activity made: else the check below
	// checks nothing of it.
	for _, want := range []string{`capblock_purchases_total{kind="block",outcome="bought"} 1`,
		`capblock_purchases_total{kind="block",outcome="offering_invalid"} 1`,
		`capblock_http_request_duration_seconds_bucket{code="201",method="POST",route="/v1/blocks",le="+Inf"} 1`,
		`capblock_reconciler_leader 1`} {
		if !strings.Contains(body, "\n"+want+"\n") {
			t.Errorf("/metrics lacks %s (block %s bought)", want, b.ID)
		}
	}

	// 4. Every query's series are there.
	qs := append(ruleQueries(t, rulesFile), dashboardQueries(t, readDashboard(t))...)
	if len(qs) < 20 {
		t.Fatalf("%d queries in the rules and the dashboard", len(qs))
	}
	if bad := unknownSeries(qs, metrics); len(bad) > 0 {
		t.Errorf("queries name series that capblock does not serve:\n%s\n/metrics:\n%s", strings.Join(bad, "\n"), body)
	}
}

// TestUnknownSeriesCaught: a rule naming a made-up metric, or a label its
// metric does not carry, and a dashboard variable on a made-up label, are
// reported; what is served is not.
func TestUnknownSeriesCaught(t *testing.T) {
	page, err := parseMetrics(`# TYPE capblock_engine_actions_failed gauge
capblock_engine_actions_failed 0
# TYPE capblock_pool_gpus gauge
capblock_pool_gpus{gpu_model="H100",zone="zone-a"} 8
# TYPE capblock_http_request_duration_seconds histogram
capblock_http_request_duration_seconds_bucket{method="POST",route="/v1/blocks",code="201",le="+Inf"} 1
capblock_http_request_duration_seconds_sum{method="POST",route="/v1/blocks",code="201"} 0.01
capblock_http_request_duration_seconds_count{method="POST",route="/v1/blocks",code="201"} 1
`)
	if err != nil {
		t.Fatal(err)
	}
	rules := filepath.Join(t.TempDir(), "rules.yml")
	if err := os.WriteFile(rules, []byte(`groups:
  - name: test
    rules:
      - alert: Served
        expr: max(capblock_engine_actions_failed) > 0 and on() histogram_quantile(0.99, sum by (le) (rate(capblock_http_request_duration_seconds_bucket{route="/v1/blocks"}[5m]))) > 1
      - alert: MadeUp
        expr: sum(rate(capblock_made_up_total[5m])) > 0
      - alert: WrongLabel
        expr: capblock_pool_gpus{gpu_type="H100"} > 0
`), 0o600); err != nil {
		t.Fatal(err)
	}
	qs := append(ruleQueries(t, rules),
		query{where: "variable", expr: "capblock_pool_gpus", labelValues: true, label: "rack"},
		query{where: "regex name", expr: `{__name__=~"capblock_.+"}`})
	got := unknownSeries(qs, page)
	want := []string{
		rules + `: MadeUp: capblock_made_up_total is not served at /metrics`,
		rules + `: WrongLabel: capblock_pool_gpus has no label gpu_type`,
		`regex name: "{__name__=~\"capblock_.+\"}": a selector matches the metric name by a pattern, which cannot be checked`,
		`variable: capblock_pool_gpus has no label rack`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("unknownSeries =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
