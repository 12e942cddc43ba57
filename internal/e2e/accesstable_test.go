package e2e

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"capblock/internal/api"
	"capblock/internal/awsapi"
	"capblock/internal/awsapi/sagemaker"
	"capblock/internal/contract"
	"capblock/internal/core"
)

// The README's access table lies between these two lines.
const (
	accessTableBegin = "<!-- access table: made from internal/contract's access table by TestReadmeAccessTable; CAPBLOCK_WRITE_README=1 rewrites it -->"
	accessTableEnd   = "<!-- end of the access table -->"
)

// TestReadmeAccessTable: the README's table of who may call what is the
// one access table of internal/contract, with each use case's REST
// operations and AWS actions. CAPBLOCK_WRITE_README=1 writes it.
func TestReadmeAccessTable(t *testing.T) {
	const path = "../../README.md"
	readme, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	before, rest, ok := strings.Cut(string(readme), accessTableBegin+"\n")
	if !ok {
		t.Fatalf("README.md has no line %q", accessTableBegin)
	}
	got, after, ok := strings.Cut(rest, accessTableEnd)
	if !ok {
		t.Fatalf("README.md has no line %q after the table", accessTableEnd)
	}
	want := accessTable()
	if got == want {
		return
	}
	if os.Getenv("CAPBLOCK_WRITE_README") == "1" {
		if err := os.WriteFile(path, []byte(before+accessTableBegin+"\n"+want+accessTableEnd+after), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("README.md's access table is not the access table; run CAPBLOCK_WRITE_README=1 go test ./internal/e2e -run TestReadmeAccessTable to write it. Want:\n%s", want)
}

// accessTable renders the access table in Markdown, most powerful role
// last.
func accessTable() string {
	rest := map[contract.UseCase][]string{}
	for op, ucs := range api.Operations() {
		for _, uc := range ucs {
			rest[uc] = append(rest[uc], "`"+op+"`")
		}
	}
	aws := map[contract.UseCase][]string{}
	for action, uc := range awsapi.EC2UseCases() {
		aws[uc] = append(aws[uc], "EC2 `"+action+"`")
	}
	for op, r := range sagemaker.AccessRules() {
		aws[r.UseCase] = append(aws[r.UseCase], "SageMaker `"+op+"`")
	}
	reach := map[contract.Reach]string{
		contract.ReachFleet: "the fleet",
		contract.ReachTeam:  "its own team's (an admin's: every team's)",
		contract.ReachOwn:   "its own credentials (an admin's: anyone's)",
	}
	var b strings.Builder
	b.WriteString("| use case | needs | on | REST operations | AWS |\n|---|---|---|---|---|\n")
	for _, role := range []core.Role{core.RoleViewer, core.RoleMember, core.RoleAdmin} {
		for _, uc := range contract.UseCases() {
			r, _ := contract.RuleOf(uc)
			if r.Role != role {
				continue
			}
			slices.Sort(rest[uc])
			slices.Sort(aws[uc])
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", uc, r.Role, reach[r.Reach],
				orDash(strings.Join(rest[uc], ", ")), orDash(strings.Join(aws[uc], ", ")))
		}
	}
	return b.String()
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}
