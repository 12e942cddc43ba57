package service

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// frontEnds are the packages that adapt a protocol onto the contract, and
// the HTTP framework they use. Add each new front end (aws, web) here.
var frontEnds = []string{
	"capblock/internal/api",
	"capblock/internal/aws",
	"capblock/internal/awsapi",
	"capblock/internal/web",
	"github.com/danielgtaylor/huma/v2",
}

// TestSeam keeps the seam between the use cases and their front ends:
// the service and its contract depend on no front end, and the contract,
// which every front end imports, not even on net/http (the service uses
// it as a client, to deliver webhooks).
func TestSeam(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the go command lists the dependencies, and CI has it: %v", err)
		}
		t.Skipf("the go command lists the dependencies: %v", err)
	}
	tests := map[string]struct {
		pkg       string
		forbidden []string
	}{
		"service":  {pkg: "capblock/internal/service", forbidden: frontEnds},
		"contract": {pkg: "capblock/internal/contract", forbidden: append([]string{"net/http"}, frontEnds...)},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			out, err := exec.Command(goTool, "list", "-deps", tc.pkg).Output()
			if err != nil {
				t.Fatalf("go list -deps %s: %v", tc.pkg, err)
			}
			deps := strings.Fields(string(out))
			if len(deps) == 0 || deps[len(deps)-1] != tc.pkg {
				t.Fatalf("go list -deps %s listed %q, not ending with the package itself", tc.pkg, deps)
			}
			for _, dep := range deps {
				for _, f := range tc.forbidden {
					if dep == f || strings.HasPrefix(dep, f+"/") {
						t.Errorf("%s depends on %s", tc.pkg, dep)
					}
				}
			}
		})
	}
}

// TestServiceReachesEnginesThroughTheBackend: the service imports no
// engine's mechanism (the local executor) itself: jobs go through
// backend.Workloads, which decides where and how they run.
func TestServiceReachesEnginesThroughTheBackend(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the go command lists the imports, and CI has it: %v", err)
		}
		t.Skipf("the go command lists the imports: %v", err)
	}
	out, err := exec.Command(goTool, "list", "-f", `{{join .Imports "\n"}}`, "capblock/internal/service").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	imports := strings.Fields(string(out))
	if len(imports) == 0 {
		t.Fatal("go list listed no imports of the service")
	}
	for _, imp := range imports {
		if imp == "capblock/internal/executor" {
			t.Errorf("the service imports %s; it must go through capblock/internal/backend", imp)
		}
	}
}
