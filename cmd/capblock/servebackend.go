package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"

	"github.com/spf13/pflag"

	"capblock/internal/backend"
	"capblock/internal/backend/kubernetes"
	"capblock/internal/core"
)

// kubeFlags are serve's flags of the Kubernetes backend.
type kubeFlags struct {
	kubeconfig string
	gpuModels  []string
	rackLabel  string
}

// addKubeFlags defines the flags of --backend kubernetes.
func addKubeFlags(fl *pflag.FlagSet, f *kubeFlags) {
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file of the cluster that --backend kubernetes sells (default: $KUBECONFIG, else the pod's in-cluster configuration)")
	fl.StringArrayVar(&f.gpuModels, "kube-gpu-model", nil, "map the GPU products whose nvidia.com/gpu.product label matches PATTERN (a glob) to the fleet's GPU model, such as 'NVIDIA-H100*=H100'; repeatable, the first match wins; an empty MODEL sells none; unmatched products take their first word after NVIDIA- (NVIDIA-L40S: L40S)")
	fl.StringVar(&f.rackLabel, "kube-rack-label", kubernetes.DefaultRackLabel, "node label that names a node's rack, for placement on few racks")
}

// checkBackend refuses, before anything is opened, a backend this build
// lacks and Kubernetes flags that cannot work.
func checkBackend(f serveFlags) error {
	switch f.backend {
	case "sim":
		if f.kube.kubeconfig != "" || len(f.kube.gpuModels) > 0 || f.kube.rackLabel != kubernetes.DefaultRackLabel {
			return usagef("--kubeconfig, --kube-gpu-model and --kube-rack-label need --backend kubernetes")
		}
		return nil
	case "kubernetes":
		_, err := kubeConfig(f.kube)
		return err
	default:
		return usagef("--backend %q is not available; this build has: sim, kubernetes", f.backend)
	}
}

// kubeConfig reads the Kubernetes backend's configuration from the flags
// (and $KUBECONFIG, without --kubeconfig).
func kubeConfig(f kubeFlags) (kubernetes.Config, error) {
	cfg := kubernetes.Config{Kubeconfig: f.kubeconfig, RackLabel: f.rackLabel}
	if cfg.Kubeconfig == "" {
		cfg.Kubeconfig = os.Getenv("KUBECONFIG")
	}
	for _, s := range f.gpuModels {
		p, err := kubernetes.ParseModelPattern(s)
		if err != nil {
			return cfg, usagef("--kube-gpu-model %v", err)
		}
		cfg.GPUModels = append(cfg.GPUModels, p)
	}
	return cfg, nil
}

// newEngine builds the backend that --backend names; close lets go of
// it once the service has stopped. The sim backend reports the fleet
// file's nodes as its inventory; Kubernetes, the cluster's GPU nodes.
// Either way the service takes its nodes from the inventory, and the
// fleet file gives the instance types, prices and limits.
func newEngine(ctx context.Context, f serveFlags, fl core.Fleet, log *slog.Logger) (engine backend.Backend, close func(), err error) {
	switch f.backend {
	case "kubernetes":
		cfg, err := kubeConfig(f.kube)
		if err != nil {
			return nil, nil, err
		}
		for _, t := range fl.Types {
			if !slices.Contains(cfg.SoldModels, t.GPUModel) {
				cfg.SoldModels = append(cfg.SoldModels, t.GPUModel)
			}
		}
		be, err := kubernetes.New(ctx, cfg, log)
		if err != nil {
			return nil, nil, fmt.Errorf("starting the Kubernetes backend: %w", err)
		}
		return be, be.Close, nil
	case "sim":
		return backend.NewSim(log, fl.Nodes), func() {}, nil
	default:
		return nil, nil, checkBackend(f)
	}
}
