package fleet

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestSlurm: the slurm section maps teams to Slurm users and accounts;
// it is optional, and every problem in it is reported with its line.
func TestSlurm(t *testing.T) {
	tests := map[string]struct {
		section string
		want    Slurm
		errs    []string
	}{
		"absent": {},
		"users and accounts": {
			section: "slurm:\n  teams:\n    ml-research: {users: [alice, bob@corp], accounts: [research]}\n    team-3f9a: {accounts: [infra]}\n",
			want: Slurm{Teams: map[string]SlurmAccess{
				"ml-research": {Users: []string{"alice", "bob@corp"}, Accounts: []string{"research"}},
				"team-3f9a":   {Accounts: []string{"infra"}},
			}},
		},
		"a team with nobody": {
			section: "slurm:\n  teams:\n    ml: {users: []}\n",
			errs:    []string{`line 12: slurm team "ml": no users and no accounts; give the Slurm users or accounts whose jobs may use the team's blocks`},
		},
		"names Slurm would read as several, or as a removal": {
			section: "slurm:\n  teams:\n    ml:\n      users: [\"a,b\", -alice, alice, alice]\n      accounts: [\"\"]\n",
			errs: []string{
				`line 13: slurm team "ml": user "a,b" may hold only letters, digits, '.', '_', '-' and '@', and not start with '-'`,
				`line 13: slurm team "ml": user "-alice" may hold only letters, digits, '.', '_', '-' and '@', and not start with '-'`,
				`line 13: slurm team "ml": user "alice" is given twice`,
				`line 14: slurm team "ml": account #1 is empty`,
			},
		},
		"a team name capblock refuses": {
			section: "slurm:\n  teams:\n    \"ml research\": {users: [alice]}\n",
			errs:    []string{`line 12: slurm team "ml research": the team's name or id "ml research" may hold only letters, digits, '-', '_' and '.'`},
		},
		"an unknown key": {
			section: "slurm:\n  teams:\n    ml: {users: [alice], groups: [ml]}\n",
			errs:    []string{`line 12: unknown key "groups"`},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseSlurm([]byte(minimal + tc.section))
			var errs []string
			if list, ok := err.(ErrorList); ok {
				for _, e := range list {
					errs = append(errs, e.Error())
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.errs, errs); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("section (-want +got):\n%s", diff)
			}
			if _, err := Parse([]byte(minimal + tc.section)); (err == nil) != (tc.errs == nil) {
				t.Errorf("Parse: %v, want an error: %v", err, tc.errs != nil)
			}
		})
	}
}

// TestLoadSlurm reads the section from a file, and names the file in
// its errors.
func TestLoadSlurm(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fleet.yaml")
	if err := os.WriteFile(path, []byte(minimal+"slurm:\n  teams:\n    ml: {users: [alice]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := LoadSlurm(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Slurm{Teams: map[string]SlurmAccess{"ml": {Users: []string{"alice"}}}}, s); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if err := os.WriteFile(path, []byte(minimal+"slurm:\n  teams:\n    ml: {}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadSlurm(path); err == nil || err.Error() != path+`:12: slurm team "ml": no users and no accounts; give the Slurm users or accounts whose jobs may use the team's blocks` {
		t.Errorf("LoadSlurm of a team with nobody: %v", err)
	}
}
