package seam

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// Packages are named here without "capblock/internal/" (and "capblock/"
// for the commands): "core", "backend/local", "cmd/capblock". Only the
// packages' own imports count, not their tests': a test may wire the real
// stack.

// rule is what one package may import of capblock's, and why.
type rule struct {
	may []string
	why string
}

// Why the leaves import nothing of capblock's.
const (
	leaf       = "a leaf: it imports nothing of capblock's"
	testHelper = "a helper of tests, which imports nothing of capblock's"
	frontEnd   = "a front end: it adapts a protocol onto the contract, and imports the contract, core, auth, the shared HTTP helpers (httpx) and tracing (telemetry) only, never another front end, the service, the store or a backend"
)

// rules lists every package of capblock's, with the packages of
// capblock's that it may import directly. Add a package, or an import,
// here on purpose: the test fails on any other.
var rules = map[string]rule{
	// The pure core, and the leaves under everything.
	"core":        {why: "the core is pure: no I/O, no clock, no database, and nothing of capblock's"},
	"auth":        {why: leaf},
	"clock":       {why: leaf},
	"humantime":   {why: leaf},
	"privatefile": {why: leaf},
	"httpx":       {why: "what the HTTP front ends share (the client address, one rate limiter): " + leaf},
	"executor":    {why: leaf + " (the local engine's processes)"},
	"telemetry":   {why: "tracing (OpenTelemetry over OTLP), which the front ends, the service and the store record into: " + leaf},
	"kubenames":   {why: "the names capblock and a Kubernetes cluster share, which the Kubernetes backend and admission both import: " + leaf},
	"fleet":       {may: []string{"core", "humantime"}, why: "the fleet file, parsed into core's types"},
	"seal":        {may: []string{"core", "privatefile"}, why: "sealing secrets under a key file, which privatefile writes"},

	// The use cases, their contract and their persistence.
	"contract": {may: []string{"core"}, why: "the contract imports core only: every front end imports it"},
	"service": {may: []string{"auth", "backend", "backend/local", "clock", "contract", "core", "privatefile", "seal", "store", "telemetry"},
		why: "the use cases: no front end, no store driver, engines through backend (backend/local is the default engine), never the executor itself"},
	"store":           {may: []string{"core", "telemetry"}, why: "the store's interface, and the commit's span every driver records"},
	"store/sqlite":    {may: []string{"core", "store"}, why: "a driver of the store"},
	"store/postgres":  {may: []string{"core", "store"}, why: "a driver of the store"},
	"store/storetest": {may: []string{"core", "store"}, why: "the conformance suite of the store's drivers"},
	"store/pgtest":    {why: testHelper},

	// The engines.
	"backend":             {may: []string{"core", "executor"}, why: "the engines' interfaces and the types they share (the executor's limits and exits among them); no engine"},
	"backend/local":       {may: []string{"backend", "core", "executor"}, why: "an engine: the sim, and jobs as processes of this machine"},
	"backend/kubernetes":  {may: []string{"backend", "core", "executor", "kubenames"}, why: "an engine"},
	"backend/slurm":       {may: []string{"backend", "core", "executor"}, why: "an engine"},
	"backend/backendtest": {may: []string{"backend", "core"}, why: "the suite every engine passes"},

	// The front ends.
	"api":              {may: []string{"auth", "contract", "core", "httpx", "telemetry"}, why: frontEnd},
	"awsapi":           {may: []string{"auth", "awsapi/sagemaker", "contract", "core", "httpx"}, why: frontEnd + "; sagemaker is its own"},
	"awsapi/sagemaker": {may: []string{"auth", "contract", "core", "httpx"}, why: frontEnd},
	"console":          {may: []string{"auth", "contract", "core"}, why: frontEnd},
	"admission":        {may: []string{"auth", "contract", "core", "kubenames"}, why: frontEnd + "; the Kubernetes names from kubenames, never from the backend"},
	"client":           {why: "the REST client of the CLI and Terraform: " + leaf},
	"tfprovider":       {may: []string{"client"}, why: "Terraform's provider, over the REST client"},

	// Tests' harnesses, and packages of tests alone.
	"testbin":     {why: testHelper},
	"testproc":    {why: testHelper},
	"kubetest":    {may: []string{"testproc"}, why: "runs a Kubernetes API server for tests"},
	"slurmtest":   {may: []string{"testproc"}, why: "runs Slurm for tests"},
	"e2e":         {why: "end-to-end tests: their code is tests"},
	"e2e/console": {why: "end-to-end tests: their code is tests"},
	"e2e/kube":    {why: "end-to-end tests: their code is tests"},
	"deploy":      {why: "the tests of deploy/'s alerting rules and dashboard against a running binary: their code is tests"},
	"simulate": {may: []string{"backend", "backend/local", "clock", "contract", "core", "service", "store", "store/sqlite"},
		why: "the deterministic simulation: the real service on a real store and the simulated engine, through the service's contract"},
	"seam": {why: "this test"},

	// The binaries, which wire everything.
	"cmd/capblock": {may: []string{"admission", "api", "auth", "awsapi", "awsapi/sagemaker", "backend", "backend/kubernetes",
		"backend/local", "backend/slurm", "client", "clock", "console", "contract", "core", "executor", "fleet", "httpx", "humantime", "privatefile", "seal",
		"service", "store", "store/postgres", "store/sqlite", "telemetry"}, why: "the binary: it wires the store, the engines, the service and the front ends"},
	"cmd/terraform-provider-capblock": {may: []string{"tfprovider"}, why: "Terraform's provider binary"},
}

// planned are packages that rules may name before they exist.
var planned = []string{}

// pendingImport is an import that breaks the rules today, with who or
// what removes it.
type pendingImport struct {
	imports, why string
}

// pending are the imports that break the rules today, each to be removed:
// the test passes with them, and fails once one is gone, so that its
// entry goes too. Never add one to make a new import pass.
var pending = map[string][]pendingImport{}

// frontEnds adapt a protocol onto the contract.
var frontEnds = []string{"api", "awsapi", "console", "admission"}

// constraint binds the rules themselves: what some packages never import,
// or import alone, whatever their rules list.
type constraint struct {
	pkgs  []string
	only  []string // when set, all they may import (a name covers its sub-packages)
	never []string // what they never import (a name covers its sub-packages)
	why   string
}

// layering is the design that the rules follow (DESIGN.md, Architecture).
var layering = []constraint{
	{pkgs: []string{"contract"}, only: []string{"core"}, why: "the contract imports core only"},
	{pkgs: []string{"service"}, never: append([]string{"tfprovider", "client", "executor"}, frontEnds...),
		why: "the service imports no front end, and reaches engines through backend"},
	{pkgs: append([]string{"awsapi/sagemaker"}, frontEnds...), only: []string{"contract", "core", "auth", "httpx", "kubenames", "telemetry"},
		why: "front ends import the contract, core, auth, httpx and telemetry (and their own sub-packages), never each other, the service, the store or a backend"},
	{pkgs: []string{"admission"}, never: []string{"backend", "executor"},
		why: "admission takes the Kubernetes names from kubenames, not from the backend (which brings the executor)"},
}

// forbiddenDeps are packages outside capblock that a package must not
// depend on, through any chain of imports.
var forbiddenDeps = map[string][]string{
	"contract": {"net/http", "github.com/danielgtaylor/huma/v2"},
	"service":  {"github.com/danielgtaylor/huma/v2"},
}

// TestSeam checks every package of capblock's against its rule.
func TestSeam(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the go command lists the imports, and CI has it: %v", err)
		}
		t.Skipf("the go command lists the imports: %v", err)
	}
	out, err := exec.Command(goTool, "list", "-deps", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", "capblock/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	g := graph{}
	for line := range strings.Lines(string(out)) {
		if f := strings.Fields(line); len(f) > 0 {
			g[f[0]] = f[1:]
		}
	}
	if len(g.capblock()) < len(rules)/2 {
		t.Fatalf("go list listed %d packages of capblock's: %v", len(g.capblock()), g.capblock())
	}
	for _, p := range check(g) {
		t.Error(p)
	}
}

// TestSeamFails: the check finds each kind of break in a graph made from
// the rules.
func TestSeamFails(t *testing.T) {
	tests := map[string]struct {
		change func(g graph)
		want   []string
	}{
		"nothing changed": {change: func(graph) {}},
		"the service imports a front end": {
			change: func(g graph) { g.add("service", "api") },
			want:   []string{`capblock/internal/service imports capblock/internal/api, which its rule does not allow`, `add "api" to rules["service"].may`},
		},
		"a front end imports another": {
			change: func(g graph) { g.add("console", "api") },
			want:   []string{`capblock/internal/console imports capblock/internal/api`},
		},
		"admission imports the Kubernetes backend": {
			change: func(g graph) { g.add("admission", "backend/kubernetes") },
			want:   []string{`capblock/internal/admission imports capblock/internal/backend/kubernetes`},
		},
		"the contract depends on net/http": {
			change: func(g graph) { g["net/url"] = append(g["net/url"], "net/http") },
			want:   []string{`capblock/internal/contract depends on net/http (capblock/internal/contract → net/url → net/http)`},
		},
		"a new package": {
			change: func(g graph) { g["capblock/internal/quota"] = []string{"capblock/internal/core"} },
			want:   []string{`capblock/internal/quota has no rule: add rules["quota"]`, "may import (today: core)"},
		},
		"a rule of no package": {
			change: func(g graph) { delete(g, "capblock/internal/humantime") },
			want:   []string{`rules["humantime"] is the rule of no package`},
		},
		"a pending import removed": {
			change: func(graph) {
				old := pending
				pending = map[string][]pendingImport{"api": {{"console", "an exception once needed"}}}
				t.Cleanup(func() { pending = old })
			},
			want: []string{`pending["api"] excuses the import of console, which capblock/internal/api no longer has: remove the entry`},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := graphOfRules()
			tc.change(g)
			got := check(g)
			if len(tc.want) == 0 && len(got) > 0 {
				t.Fatalf("check found:\n%s", strings.Join(got, "\n"))
			}
			all := strings.Join(got, "\n")
			for _, w := range tc.want {
				if !strings.Contains(all, w) {
					t.Errorf("check found:\n%s\nwant a problem saying %q", all, w)
				}
			}
		})
	}
}

// TestSeamRulesKeepTheLayering: a rule that breaks the layering fails,
// however deliberately it was added.
func TestSeamRulesKeepTheLayering(t *testing.T) {
	if problems := checkLayering(rules); len(problems) > 0 {
		t.Fatalf("the rules break the layering:\n%s", strings.Join(problems, "\n"))
	}
	broken := map[string]rule{}
	for name, r := range rules {
		broken[name] = r
	}
	broken["service"] = rule{may: append(slices.Clone(rules["service"].may), "awsapi/sagemaker")}
	broken["admission"] = rule{may: append(slices.Clone(rules["admission"].may), "backend/kubernetes")}
	broken["contract"] = rule{may: []string{"core", "clock"}}
	all := strings.Join(checkLayering(broken), "\n")
	for _, w := range []string{
		`rules["service"] lets it import awsapi/sagemaker, which the layering forbids: the service imports no front end`,
		`rules["admission"] lets it import backend/kubernetes`,
		`rules["contract"] lets it import clock, which the layering forbids: the contract imports core only`,
	} {
		if !strings.Contains(all, w) {
			t.Errorf("checkLayering found:\n%s\nwant a problem saying %q", all, w)
		}
	}
}

// graph maps each package (capblock's, the standard library's and the
// others it depends on) to its direct imports.
type graph map[string][]string

// full is a package's import path: the binaries and deploy's tests sit
// beside internal/.
func full(name string) string {
	if strings.HasPrefix(name, "cmd/") || name == "deploy" {
		return "capblock/" + name
	}
	return "capblock/internal/" + name
}

// short is a package's name in the rules, "" for a package not capblock's.
func short(path string) string {
	if rest, ok := strings.CutPrefix(path, "capblock/internal/"); ok {
		return rest
	}
	if rest, ok := strings.CutPrefix(path, "capblock/"); ok {
		return rest
	}
	return ""
}

// capblock returns capblock's packages, sorted.
func (g graph) capblock() []string {
	var out []string
	for p := range g {
		if short(p) != "" {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

func (g graph) add(from, to string) { g[full(from)] = append(g[full(from)], full(to)) }

func (g graph) remove(from, to string) {
	g[full(from)] = slices.DeleteFunc(g[full(from)], func(p string) bool { return p == full(to) })
}

// graphOfRules is the graph in which every package imports all that its
// rule allows and what pending excuses, and some of the standard library.
func graphOfRules() graph {
	g := graph{"fmt": nil, "net/url": nil, "net/http": {"net/url"}}
	for name, r := range rules {
		imports := []string{"fmt", "net/url"}
		for _, m := range r.may {
			if _, ok := rules[m]; ok {
				imports = append(imports, full(m))
			}
		}
		for _, p := range pending[name] {
			imports = append(imports, full(p.imports))
		}
		g[full(name)] = imports
	}
	return g
}

// check returns what in g breaks the rules: each import of capblock's
// that its importer's rule does not allow (and pending does not excuse),
// each package without a rule, each rule or pending import of nothing,
// each forbidden dependency, and each rule that breaks the layering.
func check(g graph) []string {
	var problems []string
	for _, p := range g.capblock() {
		name := short(p)
		r, ok := rules[name]
		if !ok {
			var today []string
			for _, imp := range g[p] {
				if s := short(imp); s != "" {
					today = append(today, s)
				}
			}
			problems = append(problems, fmt.Sprintf("%s has no rule: add rules[%q] to internal/seam/seam_test.go, listing which of capblock's packages it may import (today: %s) and why",
				p, name, strings.Join(today, ", ")))
			continue
		}
		for _, imp := range g[p] {
			target := short(imp)
			if target == "" || slices.Contains(r.may, target) || excused(name, target) {
				continue
			}
			problems = append(problems, fmt.Sprintf("%s imports %s, which its rule does not allow (%s): remove the import, or, if the design allows it, add %q to rules[%q].may in internal/seam/seam_test.go, deliberately",
				p, imp, r.why, target, name))
		}
		for _, pi := range pending[name] {
			if !slices.Contains(g[p], full(pi.imports)) {
				problems = append(problems, fmt.Sprintf("pending[%q] excuses the import of %s, which %s no longer has: remove the entry from internal/seam/seam_test.go", name, pi.imports, p))
			}
		}
	}
	for _, name := range sortedKeys(rules) {
		if _, ok := g[full(name)]; !ok {
			problems = append(problems, fmt.Sprintf("rules[%q] is the rule of no package: remove it from internal/seam/seam_test.go, or correct its name", name))
		}
		for _, m := range rules[name].may {
			if _, ok := rules[m]; !ok && !slices.Contains(planned, m) {
				problems = append(problems, fmt.Sprintf("rules[%q] allows %q, which has no rule and is not planned", name, m))
			}
		}
	}
	for _, name := range planned {
		if _, ok := g[full(name)]; ok {
			if _, ok := rules[name]; ok {
				problems = append(problems, fmt.Sprintf("%s exists now and has its rule: take it out of planned", full(name)))
			}
		}
	}
	for _, name := range sortedKeys(pending) {
		if _, ok := rules[name]; !ok {
			problems = append(problems, fmt.Sprintf("pending[%q] is for a package without a rule", name))
		}
	}
	for _, name := range sortedKeys(forbiddenDeps) {
		for _, dep := range forbiddenDeps[name] {
			if chain := g.path(full(name), dep); chain != nil {
				problems = append(problems, fmt.Sprintf("%s depends on %s (%s), which it must not", full(name), dep, strings.Join(chain, " → ")))
			}
		}
	}
	return append(problems, checkLayering(rules)...)
}

// excused reports whether pending excuses name's import of target.
func excused(name, target string) bool {
	return slices.ContainsFunc(pending[name], func(p pendingImport) bool { return p.imports == target })
}

// checkLayering returns each import that rs allow and the layering
// forbids.
func checkLayering(rs map[string]rule) []string {
	var problems []string
	covers := func(names []string, target string) bool {
		return slices.ContainsFunc(names, func(n string) bool { return target == n || strings.HasPrefix(target, n+"/") })
	}
	for _, c := range layering {
		for _, name := range c.pkgs {
			for _, target := range rs[name].may {
				own := strings.HasPrefix(target, name+"/")
				if (c.only != nil && !own && !covers(c.only, target)) || covers(c.never, target) {
					problems = append(problems, fmt.Sprintf("rules[%q] lets it import %s, which the layering forbids: %s", name, target, c.why))
				}
			}
		}
	}
	return problems
}

// path returns a chain of imports from one package to another, or nil.
func (g graph) path(from, to string) []string {
	prev := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if p == to {
			var chain []string
			for ; p != ""; p = prev[p] {
				chain = append(chain, p)
			}
			slices.Reverse(chain)
			return chain
		}
		for _, imp := range g[p] {
			if _, seen := prev[imp]; !seen {
				prev[imp] = p
				queue = append(queue, imp)
			}
		}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
