package main

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"capblock/internal/backend/kubernetes"
)

// TestServeBadBackendFlags: a bad flag of the backends is one line
// saying what is wrong, exit status 2, before anything is opened.
func TestServeBadBackendFlags(t *testing.T) {
	tests := map[string]struct {
		args []string
		want string
	}{
		"no model":                   {[]string{"--backend", "kubernetes", "--kube-gpu-model", "NVIDIA-H100*"}, `--kube-gpu-model "NVIDIA-H100*": want PATTERN=MODEL`},
		"a bad pattern":              {[]string{"--backend", "kubernetes", "--kube-gpu-model", "NVIDIA-[=H100"}, `--kube-gpu-model "NVIDIA-[=H100": pattern "NVIDIA-["`},
		"kubeconfig on the sim":      {[]string{"--kubeconfig", "kube.yaml"}, `--kubeconfig, --kube-gpu-model and --kube-rack-label need --backend kubernetes`},
		"a model on the sim":         {[]string{"--kube-gpu-model", "NVIDIA-H100*=H100"}, `need --backend kubernetes`},
		"a backend this build lacks": {[]string{"--backend", "local"}, `--backend "local" is not available; this build has: sim, kubernetes, slurm`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			db := t.TempDir() + "/capblock.db"
			got := runApp(t.Context(), nil, append([]string{"serve", "--db", db, "--listen", "127.0.0.1:0"}, tc.args...)...)
			if got.code != 2 || !strings.Contains(got.stderr, tc.want) || strings.Count(got.stderr, "\n") != 1 {
				t.Errorf("serve %v: exit %d, stderr %q; want 2 and one line with %q", tc.args, got.code, got.stderr, tc.want)
			}
			if _, err := os.Stat(db); err == nil {
				t.Errorf("serve %v created %s before refusing its flags", tc.args, db)
			}
		})
	}
}

// TestKubeConfig: the flags of --backend kubernetes reach the backend's
// configuration: the kubeconfig (from the flag, else $KUBECONFIG), the
// model patterns in their order, the rack label. (The backend's own
// tests start it on a real cluster from such a kubeconfig.)
func TestKubeConfig(t *testing.T) {
	tests := map[string]struct {
		flags kubeFlags
		env   string
		want  kubernetes.Config
	}{
		"the flag over $KUBECONFIG": {
			flags: kubeFlags{kubeconfig: "a.yaml", gpuModels: []string{"NVIDIA-H100*=H100", "NVIDIA-A100-PCIE*=", "*A100*=A100"}, rackLabel: "example.com/rack"},
			env:   "b.yaml",
			want: kubernetes.Config{Kubeconfig: "a.yaml", RackLabel: "example.com/rack", GPUModels: []kubernetes.ModelPattern{
				{Glob: "NVIDIA-H100*", Model: "H100"}, {Glob: "NVIDIA-A100-PCIE*", Model: ""}, {Glob: "*A100*", Model: "A100"}}},
		},
		"$KUBECONFIG":    {flags: kubeFlags{rackLabel: kubernetes.DefaultRackLabel}, env: "b.yaml", want: kubernetes.Config{Kubeconfig: "b.yaml", RackLabel: kubernetes.DefaultRackLabel}},
		"in the cluster": {flags: kubeFlags{rackLabel: kubernetes.DefaultRackLabel}, want: kubernetes.Config{RackLabel: kubernetes.DefaultRackLabel}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Setenv("KUBECONFIG", tc.env)
			got, err := kubeConfig(tc.flags)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
		})
	}
}
