package main

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
)

func (a *app) versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print this binary's version: its module version, the commit it was built from, and Go's",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			v := buildVersion()
			if a.jsonOutput() {
				return a.printJSON(v)
			}
			_, err := fmt.Fprintf(a.stdout, "capblock %s (commit %s of %s%s, %s)\n", v.Version, v.Commit, v.CommitTime, map[bool]string{true: ", with changes"}[v.Modified], v.Go)
			return err
		},
	}
}

// versionInfo is what the Go toolchain recorded in the binary.
type versionInfo struct {
	Version    string `json:"version"`
	Commit     string `json:"commit"`
	CommitTime string `json:"commitTime"`
	Modified   bool   `json:"modified"`
	Go         string `json:"go"`
}

// buildVersion reads the binary's build information: the module's
// version ("(devel)" for a build from a checkout), and the commit, its
// time and whether the tree had changes when built from a git checkout
// ("unknown" when the build recorded none: go run, or -buildvcs=false).
func buildVersion() versionInfo {
	v := versionInfo{Version: "(devel)", Commit: "unknown", CommitTime: "unknown", Go: "unknown"}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	v.Go = info.GoVersion
	if info.Main.Version != "" {
		v.Version = info.Main.Version
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Commit = s.Value
		case "vcs.time":
			v.CommitTime = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}
