package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"

	"capblock/internal/api"
	"capblock/internal/awsapi"
	"capblock/internal/awsapi/sagemaker"
	"capblock/internal/backend"
	"capblock/internal/clock"
	"capblock/internal/console"
	"capblock/internal/contract"
	"capblock/internal/core"
	"capblock/internal/fleet"
	"capblock/internal/httpx"
	"capblock/internal/humantime"
	"capblock/internal/privatefile"
	"capblock/internal/seal"
	"capblock/internal/service"
	"capblock/internal/store"
	"capblock/internal/telemetry"
)

type serveFlags struct {
	db        string
	fleet     string
	listen    string
	simClock  bool
	simStart  string
	backend   string
	logLevel  string
	tlsCert   string
	tlsKey    string
	rate      float64
	burst     int
	tokenFile string
	// secretsKeyFile holds the key that seals the secrets in the database.
	secretsKeyFile string
	jobsDir        string
	// privateWebhooks lets webhooks deliver to private addresses.
	privateWebhooks bool
	// webhookLog is how long the delivery log keeps finished deliveries.
	webhookLog string
	// enginePoll is how often the leader reads the engine's nodes.
	enginePoll string
	// jobUIDs is the range of users that teams' jobs run as.
	jobUIDs string
	// unisolatedJobs runs jobs as the server's own user.
	unisolatedJobs bool
	jobMemory      string
	jobPIDs        int64
	jobLog         string
	// kube are the flags of --backend kubernetes (servebackend.go).
	kube kubeFlags
	// slurm are the flags of --backend slurm (servebackend.go).
	slurm slurmFlags
	// kubeJobs are the flags of jobs on --backend kubernetes (servejobs.go).
	kubeJobs kubeJobFlags
	// localJobs are the flags of jobs run on this machine (servejobs.go).
	localJobs localJobFlags
	// admission are the flags of the admission webhooks (serveadmission.go).
	admission admissionFlags
	// debugListen is where Go's profiles are served (servedebug.go; none
	// when empty).
	debugListen string
}

// newServeCmd is `capblock serve`: with no flags it runs on a SQLite file
// in the working directory, the sim backend and the built-in demo fleet.
func newServeCmd() *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the capblock server (SQLite and the demo fleet by default)",
		Long: `Run the capblock server.

With no flags it stores its state in ./capblock.db (SQLite), runs the
simulated backend on the built-in demo fleet and listens on 127.0.0.1:8080.
With --sim-clock the server's clock stands still until moved with
POST /v1/admin/clock (or "capblock admin clock --advance 6h").`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			f.db = dbFromEnv(cmd, f.db)
			return serve(ctx, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.db, "db", "capblock.db", "SQLite database file (created if missing), or a postgres:// URL shared by replicas (or $CAPBLOCK_DB, which keeps a password out of the process list)")
	fl.StringVar(&f.jobsDir, "jobs-dir", "", "where jobs keep their logs and checkpoint directories (default: capblock-jobs beside the SQLite file, or in the working directory)")
	fl.StringVar(&f.jobUIDs, "job-uid-range", "900000-999999", "user ids (and group ids of the same number) that teams' jobs run as, one per team, when the server runs as root")
	fl.BoolVar(&f.unisolatedJobs, "allow-unisolated-jobs", false, "run jobs as the server's own user, able to read its database and tokens (needed to run jobs on a server that is not root; see Security model in the README)")
	fl.StringVar(&f.jobMemory, "job-memory-limit", "16GiB", "memory (and swap) that all processes of one job instance may use together (0: no limit)")
	fl.Int64Var(&f.jobPIDs, "job-pids-limit", 4096, "processes and threads one job instance may have at once (0: no limit)")
	fl.StringVar(&f.jobLog, "job-log-limit", "100MiB", "disk space of one job instance's log; the newest output is kept")
	fl.StringVar(&f.tokenFile, "admin-token-file", "", "where the first start writes the first administrator's token (default: admin.token beside the SQLite file, or in the working directory)")
	fl.StringVar(&f.secretsKeyFile, "secrets-key-file", "", "the key that encrypts the secrets in the database (access keys', webhooks', the offerings' signing secret), made at the first start; replicas must share one (default: secrets.key beside the SQLite file, or in the working directory)")
	fl.StringVar(&f.fleet, "fleet", "", "fleet YAML file (default: the built-in demo fleet; see docs/fleet.md)")
	fl.StringVar(&f.listen, "listen", "127.0.0.1:8080", "address to listen on")
	fl.StringVar(&f.debugListen, "debug-listen", "", "serve Go's profiles (/debug/pprof/) on a listener of their own: a port (6060) listens on loopback only, host:port elsewhere (default: none)")
	fl.BoolVar(&f.simClock, "sim-clock", false, "run on a simulated clock moved by POST /v1/admin/clock")
	fl.StringVar(&f.simStart, "sim-start", "", "start time of the simulated clock, RFC 3339 (default: now, on the hour)")
	fl.StringVar(&f.backend, "backend", "sim", "backend that makes blocks real: sim, kubernetes (docs/kubernetes.md) or slurm (docs/slurm.md)")
	addKubeFlags(fl, &f.kube)
	addSlurmFlags(fl, &f.slurm)
	addKubeJobFlags(fl, &f.kubeJobs)
	addLocalJobFlags(fl, &f.localJobs)
	addAdmissionFlags(fl, &f.admission)
	fl.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fl.StringVar(&f.tlsCert, "tls-cert", "", "serve HTTPS with this certificate (PEM); needs --tls-key")
	fl.StringVar(&f.tlsKey, "tls-key", "", "private key (PEM) of --tls-cert")
	fl.Float64Var(&f.rate, "rate-limit", 50, "requests per second allowed to one API token (0: no limit)")
	fl.IntVar(&f.burst, "rate-burst", 100, "requests one API token may send at once above --rate-limit")
	fl.BoolVar(&f.privateWebhooks, "webhook-allow-private", false, "let webhooks deliver to loopback, private and link-local addresses (default: public addresses only)")
	fl.StringVar(&f.webhookLog, "webhook-log-retention", "30d", "how long the webhook delivery log keeps a finished delivery, such as 72h or 90d")
	fl.StringVar(&f.enginePoll, "engine-poll", "10s", "how often the leading replica reads the backend's nodes and their health, such as 5s or 1m")
	return cmd
}

func serve(ctx context.Context, f serveFlags) error {
	log, err := newLogger(f.logLevel)
	if err != nil {
		return err
	}
	webhookLog, err := humantime.ParseDuration(f.webhookLog)
	if err != nil || webhookLog <= 0 {
		return usageError(fmt.Errorf("--webhook-log-retention %q: want a positive duration such as 72h or 90d", f.webhookLog))
	}
	enginePoll, err := humantime.ParseDuration(f.enginePoll)
	if err != nil || enginePoll < time.Second {
		return usageError(fmt.Errorf("--engine-poll %q: want a duration of at least 1s, such as 10s or 1m", f.enginePoll))
	}
	if (f.tlsCert == "") != (f.tlsKey == "") {
		return usageError(fmt.Errorf("--tls-cert and --tls-key go together: give both or neither"))
	}
	debugAddr, err := debugAddress(f.debugListen)
	if err != nil {
		return err
	}
	if err := telemetry.Check(os.Getenv); err != nil {
		return usageError(err)
	}
	// 1. The fleet.
	fl := fleet.Demo()
	source := "the built-in demo fleet"
	if f.fleet != "" {
		if fl, err = fleet.Load(f.fleet); err != nil {
			return err
		}
		source = f.fleet
	}
	// 2. The start of the simulated clock, if asked for (checked against
	// the stored clock once the database is open).
	var simStart time.Time
	if f.simStart != "" {
		if !f.simClock {
			return usageError(fmt.Errorf("--sim-start needs --sim-clock"))
		}
		if simStart, err = time.Parse(time.RFC3339, f.simStart); err != nil {
			return usageError(fmt.Errorf("--sim-start %q is not an RFC 3339 time such as 2026-12-01T00:00:00Z", f.simStart))
		}
		if err := clock.CheckRange(simStart); err != nil {
			return usageError(fmt.Errorf("--sim-start %s: %w", f.simStart, err))
		}
	}
	// Traces, when OTEL_* asks for them (see internal/telemetry).
	stopTraces, err := telemetry.Setup(ctx, buildVersion().Version)
	if err != nil {
		return err
	}
	defer func() {
		flush, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := stopTraces(flush); err != nil {
			log.Warn("flushing traces", "err", err)
		}
	}()
	if telemetry.Enabled(os.Getenv) {
		log.Info("tracing on: spans exported over OTLP as the OTEL_* environment says")
	}
	// 3. The store, the backend and the service. What the server writes
	// (the database, its journal, tokens, job state) is its own alone.
	if err := checkBackend(f); err != nil {
		return err
	}
	if err := checkAdmission(f); err != nil {
		return err
	}
	if err := checkKubeJobs(f); err != nil {
		return err
	}
	syscall.Umask(0o077)
	tokenPath := adminTokenPath(f)
	if err := prepareDataFiles(f.db, tokenPath, log); err != nil {
		return err
	}
	st, err := openStore(ctx, f.db)
	if err != nil {
		return fmt.Errorf("opening database %s: %w", redactDSN(f.db), err)
	}
	defer st.Close()
	var clk clock.Clock = clock.Wall{}
	if f.simClock {
		sim, err := simClock(ctx, st, simStart)
		if err != nil {
			return err
		}
		clk = sim
	}
	jobsDir := f.jobsDir
	if jobsDir == "" && isPostgresURL(f.db) {
		jobsDir = "capblock-jobs"
	} else if jobsDir == "" {
		jobsDir = filepath.Join(filepath.Dir(f.db), "capblock-jobs")
	}
	jobs, err := jobsConfig(f, jobsDir)
	if err != nil {
		return err
	}
	secretsKey, err := loadSecretsKey(ctx, f, st, log)
	if err != nil {
		return err
	}
	// The service takes its nodes from the backend's inventory.
	engine, closeEngine, err := newEngine(ctx, f, fl, st, log)
	if err != nil {
		return err
	}
	defer closeEngine()
	if jobs.Workloads, err = engineWorkloads(f, engine); err != nil {
		return err
	}
	svc, err := service.New(ctx, service.Config{Fleet: fl, Store: st, Backend: engine, Clock: clk, Log: log, Workloads: jobs.Workloads,
		JobsDir: jobs.JobsDir, JobUIDs: jobs.JobUIDs, JobLimits: jobs.JobLimits, JobsOff: jobs.JobsOff,
		AllowPrivateWebhooks: f.privateWebhooks, WebhookLogRetention: webhookLog, EnginePoll: enginePoll, SecretsKey: secretsKey})
	if err != nil {
		return err
	}
	// 4. Listen: a server that cannot serve changes nothing.
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w (is another capblock running? choose another address with --listen)", f.listen, err)
	}
	defer ln.Close()
	if debugAddr != "" {
		dln, err := net.Listen("tcp", debugAddr)
		if err != nil {
			return fmt.Errorf("listening on %s: %w (choose another address with --debug-listen)", debugAddr, err)
		}
		defer serveDebug(dln, log)()
	}
	stopAdmission, err := serveAdmission(ctx, f, svc, log)
	if err != nil {
		return err
	}
	defer stopAdmission()
	// 5. The first administrator, on the first start of a database.
	made, err := svc.Bootstrap(ctx, tokenPath)
	if err != nil {
		return err
	}
	if made {
		log.Info("created the first administrator; its API token is in the file (readable only by you)", "file", tokenPath)
	}
	// 6. Serve until interrupted. Every front end is given the guarded
	// service, which checks each call against the access table, and the
	// REST API and the AWS endpoint take from one rate limiter.
	front := svc.Guarded()
	burst := f.burst
	if burst <= 0 {
		burst = max(1, int(2*f.rate))
	}
	limiter := httpx.NewLimiter(f.rate, burst)
	srv := &http.Server{
		Handler: api.New(front, api.Options{Logger: log, Limiter: limiter, Registry: metrics(st, engine, svc), Console: console.Handler(),
			AWS: awsEndpoint(front, svc.Fleet(), log, limiter)}),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      90 * time.Second, // long polls wait up to 60s
		IdleTimeout:       2 * time.Minute,
	}
	url := "http://" + ln.Addr().String()
	if f.tlsCert != "" {
		url = "https://" + ln.Addr().String()
	}
	log.Info("capblock listening", "url", url, "db", dbName(f.db), "fleet", source, "nodes", len(svc.Fleet().Nodes),
		"backend", f.backend, "clock", clockName(f.simClock, clk))
	log.Info(loginHint(url, tokenPath, made))
	log.Info("web console: open " + url + "/ in a browser and sign in with an API token")
	// The service stops, and its goroutines with it, before the store
	// closes (deferred above, so it runs after this).
	runCtx, stopRun := context.WithCancel(ctx)
	ran := make(chan struct{})
	defer func() { stopRun(); <-ran }()
	go func() {
		defer close(ran)
		if err := svc.Run(runCtx); err != nil {
			log.Error("reconciler stopped", "err", err)
		}
	}()
	errc := make(chan error, 1)
	go func() {
		if f.tlsCert != "" {
			errc <- srv.ServeTLS(ln, f.tlsCert, f.tlsKey)
			return
		}
		errc <- srv.Serve(ln)
	}()
	select {
	case err := <-errc:
		return fmt.Errorf("serving HTTP: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("shutting down: %w", err)
	}
	return nil
}

// loadSecretsKey reads the key that seals the secrets in the database
// (access keys', webhooks', the offering signing secret) from
// --secrets-key-file (by default secrets.key beside the SQLite file, or in
// the working directory for PostgreSQL), making it on the first start: on
// a database that holds no sealed secret. A database whose secrets were
// sealed under a key whose file is missing does not get a new key: the
// start is refused, naming the key to restore (a key file of another key
// is refused by the service, which opens the signing secret).
func loadSecretsKey(ctx context.Context, f serveFlags, st store.Full, log *slog.Logger) (*seal.Key, error) {
	path := f.secretsKeyFile
	if path == "" && isPostgresURL(f.db) {
		path = "secrets.key"
	} else if path == "" {
		path = filepath.Join(filepath.Dir(f.db), "secrets.key")
	}
	sealed, err := store.SealedKeyIDs(ctx, st)
	if err != nil {
		return nil, fmt.Errorf("reading which secrets keys sealed the database's secrets: %w", err)
	}
	key, made, err := seal.LoadOrCreate(path, slices.Sorted(maps.Keys(sealed)))
	if err != nil {
		return nil, fmt.Errorf("%w (choose the file with --secrets-key-file)", err)
	}
	if made {
		log.Info("created the secrets key that encrypts the secrets in the database; back it up apart from the database, and give every replica this same file",
			"file", path, "key", key.ID())
	}
	return key, nil
}

// metrics is the registry /metrics serves: the process, the HTTP layer
// (added by the api), the store's own (PostgreSQL's pool and retries),
// the service's (conflicts between replicas and how they were settled)
// the engine's (its fenced writes and repairs, where it has them) and
// whether this replica runs the reconciler.
func metrics(st store.Full, engine backend.Backend, svc *service.Service) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, x := range []any{st, engine} {
		if c, ok := x.(interface{ Collectors() []prometheus.Collector }); ok {
			reg.MustRegister(c.Collectors()...)
		}
	}
	reg.MustRegister(svc.Collectors()...)
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "capblock_reconciler_leader",
		Help: "1 while this replica runs the lifecycle reconciler.",
	}, func() float64 {
		if svc.Leading() {
			return 1
		}
		return 0
	}))
	return reg
}

// simClock starts the simulated clock where the database left it, so that
// a restart never moves it back: at start, or at the stored time when
// start is zero. A start before the stored time is refused; on a database
// that has none, the clock starts at start or at the wall clock's hour.
func simClock(ctx context.Context, st store.Store, start time.Time) (*clock.Sim, error) {
	stored, ok, err := st.SimClock(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the simulated clock: %w", err)
	}
	switch {
	case ok && !start.IsZero() && start.Before(stored):
		return nil, usageError(fmt.Errorf("--sim-start %s is before the simulated clock's stored time %s, and that clock never moves back: leave out --sim-start to go on from %s, or give a later time",
			start.UTC().Format(time.RFC3339), stored.Format(time.RFC3339), stored.Format(time.RFC3339)))
	case ok && start.IsZero():
		start = stored
	case start.IsZero():
		start = time.Now().UTC().Truncate(time.Hour)
	}
	saved, err := st.SaveSimClock(ctx, start)
	if err != nil {
		return nil, fmt.Errorf("storing the simulated clock: %w", err)
	}
	return clock.NewSim(saved), nil
}

// adminTokenPath is where the first start writes the first
// administrator's token: --admin-token-file, by default admin.token beside
// the SQLite file, or in the working directory for PostgreSQL.
func adminTokenPath(f serveFlags) string {
	switch {
	case f.tokenFile != "":
		return f.tokenFile
	case isPostgresURL(f.db):
		return "admin.token"
	default:
		return filepath.Join(filepath.Dir(f.db), "admin.token")
	}
}

// prepareDataFiles makes the SQLite file's directory if it is missing,
// readable only by the server's user, and takes away from everyone else
// what an earlier start (or an older version) left readable: the
// database, its journal and shared-memory files, and the administrator's
// token file, saying so in the log. A file that cannot be made private
// stops the start. The secrets key file is not among them: one that
// others may read is refused when it is loaded (seal.LoadOrCreate), as
// ssh refuses such a private key, for its key may be known.
func prepareDataFiles(db, tokenPath string, log *slog.Logger) error {
	var files []string
	if !isPostgresURL(db) {
		dir := filepath.Dir(db)
		if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return fmt.Errorf("creating the data directory %s: %w", dir, err)
			}
		}
		for _, suffix := range []string{"", "-wal", "-shm", "-journal"} {
			files = append(files, db+suffix)
		}
	}
	for _, path := range append(files, tokenPath) {
		changed, err := privatefile.Tighten(path)
		if err != nil {
			return err
		}
		if changed {
			log.Warn("others could read or write this file; it is now readable by the server's user alone", "file", path)
		}
	}
	return nil
}

func clockName(sim bool, c clock.Clock) string {
	if sim {
		return "simulated, now " + c.Now().Format(time.RFC3339)
	}
	return "wall"
}

func newLogger(level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.ToUpper(level))); err != nil {
		return nil, usageError(fmt.Errorf("--log-level %q: want debug, info, warn or error", level))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l})), nil
}

// loginHint is the line that tells the operator how to log in: with the
// token file this server wrote, or one that is there from an earlier
// start; a server that found the administrator made elsewhere (another
// replica, another directory) and has no file there names none.
func loginHint(url, tokenPath string, made bool) string {
	if _, err := os.Stat(tokenPath); made || err == nil {
		return fmt.Sprintf("try: capblock login --url %s --token-file %s && capblock types", url, tokenPath)
	}
	return fmt.Sprintf("try: capblock login --url %s --token-file FILE && capblock types, with FILE an administrator's token: the first administrator was made by an earlier start or another replica, and this server wrote no token to %s", url, tokenPath)
}

// awsEndpoint is the handler of AWS's protocols (EC2 Query, SageMaker JSON
// 1.1) at /aws, signed with the users' access keys, each user and client
// address held to the API's rate (--rate-limit, --rate-burst) in the
// API's limiter. fleet names the types on the wire.
func awsEndpoint(front contract.Front, fleet core.Fleet, log *slog.Logger, limiter *httpx.Limiter) http.Handler {
	sm := sagemaker.New(front, front.Now, sagemaker.Options{
		InstanceType: func(name string) (string, bool) { return awsapi.CapblockType(fleet, name) },
		AWSName:      func(name string) string { return awsapi.AWSName(fleet, name, "ml.") },
		Log:          log,
	})
	return awsapi.New(front, front, awsapi.Options{SageMaker: sm, Logger: log, Limiter: limiter})
}
