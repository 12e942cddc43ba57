package backend

import "sync"

// Starts keeps, for one Open of an engine's Instances, which instances
// the service counts as started, so that an end is reported only for
// those. It serves the engines whose first Start of a run starts all of
// its instances at once (Kubernetes' Indexed Job, Slurm's batch job).
//
// The service counts an instance as running from the moment its Start is
// applied, and the next run of a job waits until every instance it
// counted has ended. On such an engine, the first Start of a run starts
// all its instances: the instance of a rank whose Start is not applied yet
// may run, and end, before it. Reported then, its end would be counted
// against the run's other instances, and the next run could start while
// one of them still runs. Its end therefore waits for its rank's Start;
// and if a Stop of the rank comes first (the service dropped the Start:
// the run was stopped or replaced meanwhile), it is never reported, since
// the service never counted the instance.
//
// A run that this Open never started (adopted from an earlier server, or
// ended while none watched) reports every end, as the service expects
// from the instances it adopts.
type Starts struct {
	mu      sync.Mutex
	runs    map[string]bool  // runs with an instance whose Start this Open applied
	started map[rankKey]bool // instances started by this Open, or adopted by it
	stopped map[rankKey]bool // instances of runs, started here, stopped before their Start
}

// rankKey names one instance of a run.
type rankKey struct {
	run  string
	rank int
}

// EndVerdict is what becomes of an instance's end.
type EndVerdict int

const (
	ReportEnd EndVerdict = iota // send it on Exits
	HoldEnd                     // wait for the instance's Start or Stop
	DropEnd                     // never sent: the service did not count the instance
)

// NewStarts records nothing yet.
func NewStarts() *Starts {
	return &Starts{runs: map[string]bool{}, started: map[rankKey]bool{}, stopped: map[rankKey]bool{}}
}

// Start records that the instance's Start was applied.
func (s *Starts) Start(run string, rank int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.runs[run] = true
	s.started[rankKey{run, rank}] = true
}

// Adopt records an instance that Adopt reported running.
func (s *Starts) Adopt(run string, rank int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.started[rankKey{run, rank}] = true
}

// Stop records a Stop of the instance.
func (s *Starts) Stop(run string, rank int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if k := (rankKey{run, rank}); s.runs[run] && !s.started[k] {
		s.stopped[k] = true
	}
}

// Verdict says what to do with the end of the instance.
func (s *Starts) Verdict(run string, rank int) EndVerdict {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := rankKey{run, rank}
	switch {
	case !s.runs[run] || s.started[k]:
		return ReportEnd
	case s.stopped[k]:
		return DropEnd
	default:
		return HoldEnd
	}
}
