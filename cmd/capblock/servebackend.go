package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"time"

	"github.com/spf13/pflag"

	"capblock/internal/backend"
	"capblock/internal/backend/kubernetes"
	"capblock/internal/backend/local"
	"capblock/internal/backend/slurm"
	"capblock/internal/core"
	"capblock/internal/fleet"
	"capblock/internal/humantime"
	"capblock/internal/store"
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

// slurmFlags are serve's flags of the Slurm backend.
type slurmFlags struct {
	conf        string
	bin         string
	gpuModels   []string
	partitions  []string
	zone        string
	rackFeature string
	zoneFeature string
	holdUsers   []string
	grace       string
	jobDir      string
	scontrol    string
}

// addSlurmFlags defines the flags of --backend slurm.
func addSlurmFlags(fl *pflag.FlagSet, f *slurmFlags) {
	fl.StringVar(&f.conf, "slurm-conf", "", "slurm.conf of the cluster that --backend slurm sells (default: $SLURM_CONF, else Slurm's own default)")
	fl.StringVar(&f.bin, "slurm-bin", "", "folder of Slurm's commands scontrol, squeue and scancel (default: found in $PATH)")
	fl.StringArrayVar(&f.gpuModels, "slurm-gpu-model", nil, "map a GPU GRES type to the fleet's GPU model, such as 'nvidia_h100_80gb_hbm3=H100'; repeatable; '=MODEL' names untyped GPUs (gpu:8), 'TYPE=' sells none; unmapped types take their first word after nvidia_, upper-cased (h100: H100)")
	fl.StringArrayVar(&f.partitions, "slurm-partition", nil, "sell only the nodes of this Slurm partition; repeatable (default: every partition)")
	fl.StringVar(&f.zone, "slurm-zone", "", "zone of the nodes without a zone feature (default: Slurm's ClusterName)")
	fl.StringVar(&f.rackFeature, "slurm-rack-feature", slurm.DefaultRackFeature, "prefix of the node feature that names a node's rack, for placement on few racks")
	fl.StringVar(&f.zoneFeature, "slurm-zone-feature", slurm.DefaultZoneFeature, "prefix of the node feature that names a node's zone")
	fl.StringSliceVar(&f.holdUsers, "slurm-hold-users", nil, "Slurm users of the reservations of a team that the fleet file's slurm section does not map: its nodes are held, no job of the team may use them (default: the user capblock runs as)")
	fl.StringVar(&f.grace, "slurm-grace", slurm.DefaultGrace.String(), "how long a terminating block's jobs have between SIGTERM and their end, such as 5m")
	fl.StringVar(&f.scontrol, "slurm-scontrol", slurm.ScontrolSession, "how the reservation commands reach slurmctld: session (a few long-lived scontrol processes that read them on their input, restarted when one dies or hangs) or process (one scontrol per command)")
	fl.StringVar(&f.jobDir, "slurm-job-dir", "", "folder, at the same path on this host and on every node (a shared file system), of capblock's jobs on Slurm: their working and checkpoint directories and output files (default: none, and capblock runs no jobs; users submit with sbatch --reservation)")
}

// checkBackend refuses, before anything is opened, a backend this build
// lacks and a backend's flags that cannot work.
func checkBackend(f serveFlags) error {
	kubeSet := f.kube.kubeconfig != "" || len(f.kube.gpuModels) > 0 || f.kube.rackLabel != kubernetes.DefaultRackLabel
	sf := f.slurm
	slurmSet := sf.conf != "" || sf.bin != "" || sf.zone != "" || len(sf.gpuModels) > 0 || len(sf.partitions) > 0 || len(sf.holdUsers) > 0 || sf.jobDir != "" ||
		sf.rackFeature != slurm.DefaultRackFeature || sf.zoneFeature != slurm.DefaultZoneFeature || sf.grace != slurm.DefaultGrace.String() ||
		sf.scontrol != slurm.ScontrolSession
	if kubeSet && f.backend != "kubernetes" {
		return usagef("--kubeconfig, --kube-gpu-model and --kube-rack-label need --backend kubernetes")
	}
	if slurmSet && f.backend != "slurm" {
		return usagef("the --slurm-* flags need --backend slurm")
	}
	switch f.backend {
	case "sim":
		return nil
	case "kubernetes":
		_, err := kubeConfig(f.kube)
		return err
	case "slurm":
		_, err := slurmConfig(f.slurm, "")
		return err
	default:
		return usagef("--backend %q is not available; this build has: sim, kubernetes, slurm", f.backend)
	}
}

// slurmConfig reads the Slurm backend's configuration from the flags
// (and $SLURM_CONF, without --slurm-conf) and, when the server has one,
// the fleet file's slurm section: which Slurm users and accounts may use
// each team's reservations.
func slurmConfig(f slurmFlags, fleetFile string) (slurm.Config, error) {
	cfg := slurm.Config{Conf: f.conf, Bin: f.bin, Partitions: f.partitions, Zone: f.zone,
		RackFeature: f.rackFeature, ZoneFeature: f.zoneFeature, HoldUsers: f.holdUsers, Scontrol: f.scontrol}
	if f.scontrol != slurm.ScontrolSession && f.scontrol != slurm.ScontrolProcess {
		return cfg, usagef("--slurm-scontrol %q: want session or process", f.scontrol)
	}
	if cfg.Conf == "" {
		cfg.Conf = os.Getenv("SLURM_CONF")
	}
	for _, s := range f.gpuModels {
		typ, model, err := slurm.ParseModel(s)
		if err != nil {
			return cfg, usagef("--slurm-gpu-model %v", err)
		}
		if cfg.GPUModels == nil {
			cfg.GPUModels = map[string]string{}
		}
		cfg.GPUModels[typ] = model
	}
	grace, err := humantime.ParseDuration(f.grace)
	if err != nil || grace < time.Second {
		return cfg, usagef("--slurm-grace %q: want a duration of at least 1s, such as 5m", f.grace)
	}
	cfg.Grace = grace
	if fleetFile != "" {
		sec, err := fleet.LoadSlurm(fleetFile)
		if err != nil {
			return cfg, err
		}
		for team, a := range sec.Teams {
			if cfg.Teams == nil {
				cfg.Teams = map[string]slurm.Access{}
			}
			cfg.Teams[team] = slurm.Access{Users: a.Users, Accounts: a.Accounts}
		}
	}
	return cfg, nil
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
// file's nodes as its inventory; Kubernetes and Slurm, the cluster's GPU
// nodes. Either way the service takes its nodes from the inventory, and
// the fleet file gives the instance types, prices and limits. Slurm
// reads the teams' names from st, since the fleet file may map a team
// by name and a block carries its team's id.
func newEngine(ctx context.Context, f serveFlags, fl core.Fleet, st store.Full, log *slog.Logger) (engine backend.Backend, close func(), err error) {
	switch f.backend {
	case "slurm":
		cfg, err := slurmConfig(f.slurm, f.fleet)
		if err != nil {
			return nil, nil, err
		}
		for _, t := range fl.Types {
			if !slices.Contains(cfg.SoldModels, t.GPUModel) {
				cfg.SoldModels = append(cfg.SoldModels, t.GPUModel)
			}
		}
		cfg.TeamName = func(ctx context.Context, id string) (string, error) {
			t, err := st.Team(ctx, id)
			if errors.Is(err, store.ErrNotFound) {
				return "", nil // a team of no name: mapped by id, or not at all
			}
			return t.Name, err
		}
		be, err := slurm.New(ctx, cfg, log)
		if err != nil {
			return nil, nil, fmt.Errorf("starting the Slurm backend: %w", err)
		}
		return be, be.Close, nil
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
		return local.NewSim(log, fl.Nodes), func() {}, nil
	default:
		return nil, nil, checkBackend(f)
	}
}
