package slurm

import (
	"context"
	"errors"
	"fmt"
	"os/user"
	"strings"
	"time"
)

// Defaults of Config.
const (
	// DefaultRackFeature and DefaultZoneFeature prefix the node
	// features that name a node's rack and zone: "rack=r12", "zone=b".
	// Slurm has neither notion; features are where sites keep them.
	DefaultRackFeature = "rack="
	DefaultZoneFeature = "zone="
	// DefaultGrace is how long a block's jobs have between the SIGTERM
	// of its termination and their end.
	DefaultGrace = 5 * time.Minute
	// DefaultReleaseWait bounds how long Release waits, in one call,
	// for the reservation's cancelled jobs to end before it deletes the
	// reservation (Slurm refuses to delete one in use); the outbox calls
	// again after that.
	DefaultReleaseWait = 15 * time.Second
	// DefaultConvergePoll is how often the convergence (Converge) reads
	// the reservations and repairs them.
	DefaultConvergePoll = 2 * time.Second
)

// Config is what the Slurm backend is built from; the zero value drives
// the Slurm of this host's default slurm.conf with every default.
type Config struct {
	// Bin is the folder of Slurm's commands (scontrol, squeue,
	// scancel); empty: $PATH.
	Bin string
	// Conf is the slurm.conf the commands read (SLURM_CONF); empty:
	// the environment's, else Slurm's default.
	Conf string
	// GPUModels map a GPU GRES type ("h100", "nvidia_h100_80gb_hbm3")
	// to the fleet's GPU model; a type absent here gets DefaultModel's,
	// and the key "" names the model of untyped GPUs (gpu:8), which are
	// otherwise not sold. An empty model sells none of that type.
	GPUModels map[string]string
	// SoldModels, when set, are the GPU models the fleet sells (its
	// instance types'): a node of another model is not reported.
	SoldModels []string
	// Partitions, when set, limit the sold nodes to those in one of
	// them.
	Partitions []string
	// Zone is the zone of a node without a zone feature; default
	// Slurm's ClusterName.
	Zone string
	// RackFeature and ZoneFeature prefix the node features that name
	// its rack and zone. Defaults DefaultRackFeature, DefaultZoneFeature.
	RackFeature string
	ZoneFeature string
	// Teams maps a team, by id or name, to the Slurm users and
	// accounts whose jobs may use its reservations.
	Teams map[string]Access
	// TeamName returns a team's name from its id, so that Teams may be
	// keyed by name (blocks carry the id); nil: ids only.
	TeamName func(ctx context.Context, id string) (string, error)
	// HoldUsers are the users of the reservation of a team that Teams
	// lacks: the nodes are held from Slurm's own scheduling, and no job
	// of the team can use them until the fleet file maps it. Default:
	// the user capblock runs as.
	HoldUsers []string
	// Grace is how long the jobs of a terminating block have between
	// their SIGTERM and their end. Default DefaultGrace.
	Grace time.Duration
	// ReleaseWait bounds Release's wait for cancelled jobs. Default
	// DefaultReleaseWait.
	ReleaseWait time.Duration
	// ConvergePoll is how often the convergence reads the reservations
	// and repairs what differs from the desired state. Default
	// DefaultConvergePoll.
	ConvergePoll time.Duration
	// Now is the clock the backend compares the blocks' windows with,
	// and on which the convergence measures backend.UnknownGrace;
	// default time.Now (actions follow the wall clock).
	Now func() time.Time
	// Scontrol is how the reservation commands (create, update, delete
	// and show reservation) run: ScontrolSession (the default), in a
	// few long-lived scontrol processes that read them on their input;
	// ScontrolProcess, one scontrol process per command. The other
	// commands always run a process each.
	Scontrol string
	// Sessions bounds the scontrol sessions, one command each at a time
	// (default DefaultSessions).
	Sessions int
	// CommandTimeout bounds one command of a session; past it the
	// session is killed and the command reported failed (default
	// DefaultCommandTimeout).
	CommandTimeout time.Duration
}

// Access is who may run jobs in a team's reservations.
type Access struct {
	Users    []string
	Accounts []string
}

// ParseModel reads "TYPE=MODEL", as --slurm-gpu-model takes it.
func ParseModel(s string) (gresType, model string, err error) {
	gresType, model, ok := strings.Cut(s, "=")
	if !ok {
		return "", "", fmt.Errorf("%q: want TYPE=MODEL, such as nvidia_h100_80gb_hbm3=H100", s)
	}
	if strings.ContainsAny(gresType, ":,=() ") || strings.ContainsAny(model, "=") {
		return "", "", fmt.Errorf("%q: a GRES type holds no ':', ',', '=', '(' or space, a model no '='", s)
	}
	return gresType, model, nil
}

// DefaultModel is the GPU model of a GRES type that Config.GPUModels
// does not map: its first word after the vendor's, upper-cased
// ("h100" → "H100", "nvidia_h100_80gb_hbm3" → "H100",
// "tesla_v100-sxm2-16gb" → "V100", "l40s" → "L40S").
func DefaultModel(gresType string) string {
	words := strings.FieldsFunc(gresType, func(r rune) bool { return r == '_' || r == '-' })
	for len(words) > 1 && (strings.EqualFold(words[0], "nvidia") || strings.EqualFold(words[0], "tesla")) {
		words = words[1:]
	}
	if len(words) == 0 {
		return ""
	}
	return strings.ToUpper(words[0])
}

// withDefaults fills in what cfg leaves out and checks the rest.
func (cfg Config) withDefaults() (Config, error) {
	if cfg.RackFeature == "" {
		cfg.RackFeature = DefaultRackFeature
	}
	if cfg.ZoneFeature == "" {
		cfg.ZoneFeature = DefaultZoneFeature
	}
	if cfg.Grace <= 0 {
		cfg.Grace = DefaultGrace
	}
	if cfg.ReleaseWait <= 0 {
		cfg.ReleaseWait = DefaultReleaseWait
	}
	if cfg.ConvergePoll <= 0 {
		cfg.ConvergePoll = DefaultConvergePoll
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Scontrol == "" {
		cfg.Scontrol = ScontrolSession
	}
	if cfg.Sessions <= 0 {
		cfg.Sessions = DefaultSessions
	}
	if cfg.CommandTimeout <= 0 {
		cfg.CommandTimeout = DefaultCommandTimeout
	}
	if len(cfg.HoldUsers) == 0 {
		u, err := user.Current()
		if err != nil {
			return cfg, fmt.Errorf("finding the user capblock runs as, the default of the reservations' hold users: %w", err)
		}
		cfg.HoldUsers = []string{u.Username}
	}
	var errs []error
	if cfg.Scontrol != ScontrolSession && cfg.Scontrol != ScontrolProcess {
		errs = append(errs, fmt.Errorf("scontrol transport %q: want %s or %s", cfg.Scontrol, ScontrolSession, ScontrolProcess))
	}
	for team, a := range cfg.Teams {
		if len(a.Users) == 0 && len(a.Accounts) == 0 {
			errs = append(errs, fmt.Errorf("team %q has no Slurm users and no accounts", team))
		}
	}
	return cfg, errors.Join(errs...)
}
