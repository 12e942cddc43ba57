package fleet

import (
	"errors"
	"fmt"
	"os"
	"sort"
)

// Slurm is the fleet file's optional slurm section: what `capblock serve
// --backend slurm` needs beyond the fleet. Each team's blocks become
// Slurm reservations, and Teams says whose jobs may use them.
type Slurm struct {
	// Teams maps a team, by name or id, to the Slurm users and accounts
	// of its members. nil when the section is absent.
	Teams map[string]SlurmAccess
}

// SlurmAccess is who may run jobs in a team's reservations: the Slurm
// users, the Slurm accounts, or both (then a job must match both, as
// Slurm reads a reservation that names both).
type SlurmAccess struct {
	Users    []string
	Accounts []string
}

// fileSlurm is the slurm section as written:
//
//	slurm:
//	  teams:
//	    ml-research: {users: [alice, bob], accounts: [research]}
type fileSlurm struct {
	Teams map[string]fileSlurmTeam `yaml:"teams"`
}

type fileSlurmTeam struct {
	Users    []string `yaml:"users"`
	Accounts []string `yaml:"accounts"`
}

// maxSlurmName bounds a Slurm user or account name.
const maxSlurmName = 64

// LoadSlurm reads the fleet file at path, validates all of it, and
// returns its slurm section.
func LoadSlurm(path string) (Slurm, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Slurm{}, fmt.Errorf("reading fleet file: %w", err)
	}
	_, s, err := parse(data)
	var list ErrorList
	if errors.As(err, &list) {
		for _, e := range list {
			e.File = path
		}
		return Slurm{}, list
	}
	return s, err
}

// ParseSlurm validates a fleet file and returns its slurm section.
func ParseSlurm(data []byte) (Slurm, error) {
	_, s, err := parse(data)
	return s, err
}

// slurm validates the slurm section and converts it: a team's key is a
// name or id as capblock takes them, each with at least one user or
// account, each a name that Slurm reads as one name in a list (no comma,
// space or '=', not starting with the '-' or '+' of Slurm's list edits).
func (c *checker) slurm(fs fileSlurm) Slurm {
	if fs.Teams == nil {
		return Slurm{}
	}
	s := Slurm{Teams: make(map[string]SlurmAccess, len(fs.Teams))}
	keys := make([]string, 0, len(fs.Teams))
	for k := range fs.Teams {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, team := range keys {
		ft := fs.Teams[team]
		path := "$.slurm.teams." + team
		where := fmt.Sprintf("slurm team %q", team)
		if team == "" {
			c.addf("$.slurm.teams", where, "a team's name or id is empty")
			continue
		}
		if err := checkName(team); err != nil {
			c.addf(path, where, "the team's name or id %v", err)
			continue
		}
		if len(ft.Users) == 0 && len(ft.Accounts) == 0 {
			c.addf(path, where, "no users and no accounts; give the Slurm users or accounts whose jobs may use the team's blocks")
			continue
		}
		c.slurmNames(path+".users", where, "user", ft.Users)
		c.slurmNames(path+".accounts", where, "account", ft.Accounts)
		s.Teams[team] = SlurmAccess{Users: ft.Users, Accounts: ft.Accounts}
	}
	return s
}

// slurmNames checks a list of Slurm user or account names.
func (c *checker) slurmNames(path, where, kind string, names []string) {
	seen := map[string]bool{}
	for i, n := range names {
		p := fmt.Sprintf("%s[%d]", path, i)
		switch {
		case n == "":
			c.addf(p, where, "%s #%d is empty", kind, i+1)
		case len(n) > maxSlurmName:
			c.addf(p, where, "%s %q is longer than %d characters", kind, n, maxSlurmName)
		case !slurmNameOK(n):
			c.addf(p, where, "%s %q may hold only letters, digits, '.', '_', '-' and '@', and not start with '-'", kind, n)
		case seen[n]:
			c.addf(p, where, "%s %q is given twice", kind, n)
		}
		seen[n] = true
	}
}

func slurmNameOK(s string) bool {
	if s[0] == '-' {
		return false
	}
	for i := range len(s) {
		ch := s[i]
		ok := ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '-' || ch == '_' || ch == '.' || ch == '@'
		if !ok {
			return false
		}
	}
	return true
}
