package kubetest

import (
	"context"
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// ExitCodeAnnotation ends a pod of a cluster started with
// Options.PodsRunUntilEnded: KWOK terminates its containers with the
// annotation's value as their exit code.
const ExitCodeAnnotation = "kwok.capblock.io/exit-code"

// podExitStage is the stage of Options.PodsRunUntilEnded.
//
//go:embed kwok/pod-exit.yaml
var podExitStage []byte

// kwokStages are the configuration files KWOK runs with: the built-in
// stages of bin, but those that opts replaces, then opts's own.
func (c *Cluster) kwokStages(bin string, opts Options) ([]string, error) {
	builtin, err := filepath.Glob(filepath.Join(bin, "kwok-stages", "*.yaml"))
	if err != nil || len(builtin) == 0 {
		return nil, fmt.Errorf("no KWOK stages in %s", filepath.Join(bin, "kwok-stages"))
	}
	extra := slices.Clone(opts.Stages)
	replaced := map[string]bool{}
	if opts.PodsRunUntilEnded {
		path := filepath.Join(c.dir, "pod-exit.yaml")
		if err := os.WriteFile(path, podExitStage, 0o600); err != nil {
			return nil, fmt.Errorf("writing KWOK's pod-exit stage: %w", err)
		}
		extra = append(extra, path)
		replaced["pod-complete.yaml"] = true
	}
	for _, f := range opts.Stages {
		replaced[filepath.Base(f)] = true
	}
	var out []string
	for _, f := range builtin {
		if !replaced[filepath.Base(f)] {
			out = append(out, f)
		}
	}
	return append(out, extra...), nil
}

// EndPod makes KWOK end the containers of pod namespace/name with code,
// on a cluster started with Options.PodsRunUntilEnded.
func (c *Cluster) EndPod(ctx context.Context, namespace, name string, code int) error {
	cs, err := kubernetes.NewForConfig(c.AdminConfig())
	if err != nil {
		return fmt.Errorf("making a client: %w", err)
	}
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:"%d"}}}`, ExitCodeAnnotation, code)
	if _, err := cs.CoreV1().Pods(namespace).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("ending pod %s/%s: %w", namespace, name, err)
	}
	return nil
}
