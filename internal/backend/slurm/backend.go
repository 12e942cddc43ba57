package slurm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"capblock/internal/core"
)

// Backend is the Slurm backend. It is safe for concurrent use.
type Backend struct {
	cfg    Config
	log    *slog.Logger
	reader nodeReader
	env    []string          // the commands' environment
	paths  map[string]string // command → its path
	// sessions run the reservation commands; nil: a process per call
	// (Config.Scontrol).
	sessions *sessions

	mu       sync.Mutex
	skipped  map[string]string // node → why the inventory leaves it out, as last logged
	gpus     map[string]int    // node → its GPUs, from the last read of the nodes
	unmapped map[string]bool   // teams already logged as lacking Slurm users
	names    map[string]string // team id → name
	exists   map[string]bool   // reservations last seen to exist (known)
	// wrote is each reservation as this process last wrote it, created
	// or updated (remembered); Reserve moves it without reading it.
	wrote map[string]reservation
	// held is the version of each block's reservation that this process
	// last wrote or read (fence.go).
	held map[string]heldVersion

	// versionsInSlurm: the reservations record their block's version in
	// Slurm (fence.go); else only held does.
	versionsInSlurm bool
	locks           blockLocks // one writer of a reservation at a time
	conv            converger  // Converge's loop (converge.go)

	commands    atomic.Int64 // reservation commands run, for the tests
	staleWrites atomic.Int64 // writes the version fence refused
	polls       atomic.Int64 // convergence passes done, for the tests
}

// New finds Slurm's commands, asks the controller for its
// configuration (so that a controller out of reach, or a command that
// cannot authenticate, stops the start with what is wrong), and
// returns the backend.
func New(ctx context.Context, cfg Config, log *slog.Logger) (*Backend, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("configuring the Slurm backend: %w", err)
	}
	b := &Backend{cfg: cfg, log: log, paths: map[string]string{},
		skipped: map[string]string{}, gpus: map[string]int{}, unmapped: map[string]bool{}, names: map[string]string{},
		exists: map[string]bool{}, wrote: map[string]reservation{}, held: map[string]heldVersion{}}
	// 1. The commands, and an environment that reads and writes every
	// time in UTC, whatever the zone of capblock's host or of slurmctld:
	// scontrol reads and prints times in its own process's zone.
	for _, name := range []string{"scontrol", "squeue", "scancel"} {
		path := name
		if cfg.Bin != "" {
			path = filepath.Join(cfg.Bin, name)
		}
		if b.paths[name], err = exec.LookPath(path); err != nil {
			return nil, fmt.Errorf("finding Slurm's %s (install Slurm's client commands, or give their folder with --slurm-bin): %w", name, err)
		}
	}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TZ=") && !strings.HasPrefix(kv, "SLURM_TIME_FORMAT=") && (cfg.Conf == "" || !strings.HasPrefix(kv, "SLURM_CONF=")) {
			b.env = append(b.env, kv)
		}
	}
	b.env = append(b.env, "TZ=UTC")
	if cfg.Conf != "" {
		// A missing file would send the commands looking for a
		// configless controller in DNS, for a minute.
		if _, err := os.Stat(cfg.Conf); err != nil {
			return nil, fmt.Errorf("reading Slurm's configuration: %w", err)
		}
		b.env = append(b.env, "SLURM_CONF="+cfg.Conf)
	}
	// 2. The controller's configuration: its cluster's name is the
	// default zone.
	out, err := b.run(ctx, "scontrol", "show", "config")
	if err != nil {
		return nil, fmt.Errorf("asking slurmctld for its configuration: %w", err)
	}
	if b.cfg.Zone == "" {
		b.cfg.Zone = configValue(out, "ClusterName")
	}
	if b.cfg.Zone == "" {
		return nil, errors.New("slurmctld's configuration names no ClusterName; give the nodes' zone with --slurm-zone")
	}
	// Where the blocks' versions are recorded (fence.go): in the
	// reservations, unless a burst buffer plugin would read the field.
	if bb := configValue(out, "BurstBufferType"); versionsInSlurm(bb) {
		b.versionsInSlurm = true
	} else {
		log.Warn("the Slurm cluster has a burst buffer plugin: the blocks' versions are not recorded in their reservations, and the version fence holds within this process only",
			"burstBufferType", bb)
	}
	b.reader = nodeReader{models: cfg.GPUModels, sold: cfg.SoldModels, partitions: cfg.Partitions,
		zone: b.cfg.Zone, rackFeature: cfg.RackFeature, zoneFeature: cfg.ZoneFeature}
	// 3. The reservation commands' sessions: the first starts now, so
	// that an scontrol that cannot run one is found at the start, and
	// its commands then run a process each.
	if cfg.Scontrol == ScontrolSession {
		b.sessions = newSessions(b.paths["scontrol"], b.env, cfg.Sessions, cfg.CommandTimeout)
		s, err := b.sessions.take(ctx)
		if err != nil {
			b.sessions = nil
			log.Warn("scontrol cannot run a session; the reservation commands run a process each", "err", err)
		} else {
			b.sessions.give(s, true)
		}
	}
	return b, nil
}

// Close stops the convergence (Converge) and waits for its pass in
// progress, then stops the scontrol sessions. Commands that run
// meanwhile fail; those that follow run a process each.
func (b *Backend) Close() {
	b.stopConverging(true)
	if b.sessions != nil {
		b.sessions.close()
	}
}

// configValue reads one "Key = Value" line of `scontrol show config`.
func configValue(out, key string) string {
	for _, line := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(line, "=")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// Name returns "slurm".
func (b *Backend) Name() string { return "slurm" }

// Inventory reports the sold nodes of `scontrol show nodes`, sorted by
// name: those with GPUs of one GRES type that maps to a sold model, in
// a sold partition. Each other GPU node is logged once (again if its
// reason changes). The leader calls it at every poll of the engine.
func (b *Backend) Inventory(ctx context.Context) ([]core.Node, error) {
	recs, err := b.readNodes(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]core.Node, 0, len(recs))
	skipped := map[string]string{}
	for _, r := range recs {
		node, why, notable := b.reader.read(r)
		if why != "" {
			if notable {
				skipped[r["NodeName"]] = why
			}
			continue
		}
		out = append(out, node)
	}
	b.logSkipped(skipped)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// NodeHealth reports each sold node that Slurm has down, drained or
// failed, with its state and Slurm's reason.
func (b *Backend) NodeHealth(ctx context.Context) ([]core.NodeHealth, error) {
	recs, err := b.readNodes(ctx)
	if err != nil {
		return nil, err
	}
	var out []core.NodeHealth
	for _, r := range recs {
		if _, why, _ := b.reader.read(r); why != "" {
			continue
		}
		if reason := unhealthyReason(r); reason != "" {
			out = append(out, core.NodeHealth{Node: r["NodeName"], Health: core.Unhealthy, Reason: reason, Source: core.HealthFromEngine})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	return out, nil
}

// readNodes reads every node of the cluster, and keeps their GPU counts
// (for reservations that hold part of a node).
func (b *Backend) readNodes(ctx context.Context) ([]record, error) {
	out, err := b.run(ctx, "scontrol", "--oneliner", "--all", "show", "nodes")
	if err != nil {
		return nil, fmt.Errorf("reading Slurm's nodes: %w", err)
	}
	recs := parseRecords(out)
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, r := range recs {
		if g, err := parseGPUs(r["Gres"]); err == nil {
			b.gpus[r["NodeName"]] = g.count
		}
	}
	return recs, nil
}

// logSkipped logs the GPU nodes left out that were not left out for the
// same reason at the last call.
func (b *Backend) logSkipped(skipped map[string]string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for name, why := range skipped {
		if b.skipped[name] != why {
			b.log.Warn("a GPU node of the Slurm cluster is not sold", "node", name, "reason", why)
		}
	}
	b.skipped = skipped
}

// commandError is a Slurm command that failed, with what it said.
type commandError struct {
	command string
	stderr  string
	err     error
}

func (e *commandError) Error() string {
	if e.stderr == "" {
		return fmt.Sprintf("%s: %v", e.command, e.err)
	}
	return fmt.Sprintf("%s: %v: %s", e.command, e.err, e.stderr)
}

func (e *commandError) Unwrap() error { return e.err }

// slurmSays reports whether err is a Slurm command's failure whose
// message holds text (Slurm's messages are its only error codes on the
// command line).
func slurmSays(err error, text string) bool {
	var ce *commandError
	return errors.As(err, &ce) && strings.Contains(ce.stderr, text)
}

// scontrol runs a reservation command (create, update, delete or show
// reservation) and returns what it printed on its standard output,
// records one a line: in a session (Config.Scontrol), else in a process
// of its own. Words holding a space or a quote, which a session would
// read otherwise than a process, run in a process.
func (b *Backend) scontrol(ctx context.Context, args ...string) (string, error) {
	// A session sends the command before it watches ctx: a command of a
	// stopped convergence pass must not be sent at all.
	if err := ctx.Err(); err != nil {
		return "", err
	}
	b.commands.Add(1)
	if b.sessions != nil && !b.sessions.isClosed() && !slices.ContainsFunc(args, func(a string) bool {
		return a == "" || strings.ContainsAny(a, " \t\n\r\"'#")
	}) {
		out, err := b.sessions.run(ctx, args)
		b.log.Debug("ran a Slurm command in a session", "command", "scontrol", "args", args, "err", err)
		return out, err
	}
	return b.run(ctx, "scontrol", append([]string{"--oneliner"}, args...)...)
}

// run runs one of Slurm's commands in the backend's environment and
// returns its standard output.
func (b *Backend) run(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, b.paths[name], args...)
	cmd.Env = b.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	b.log.Debug("ran a Slurm command", "command", name, "args", args, "err", err)
	if err != nil {
		// scontrol writes some refusals on its standard output.
		msg := strings.TrimSpace(stderr.String() + " " + stdout.String())
		return "", &commandError{command: name + " " + strings.Join(args, " "), stderr: msg, err: err}
	}
	return stdout.String(), nil
}
