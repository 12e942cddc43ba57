package kubernetes

import (
	"strconv"
	"sync"
)

// starts keeps, for one Open, which instances the service counts as
// started, so that an end is reported only for those.
//
// The service counts an instance as running from the moment its Start is
// applied, and the next run of a job waits until every instance it
// counted has ended. On the cluster, the first Start of a run makes the
// whole Indexed Job: the pod of a rank whose Start is not applied yet
// may run, and end, before it. Reported then, its end would be counted
// against the run's other instances, and the next run could start while
// one of them still runs. Its end therefore waits for its rank's Start;
// and if a Stop of the rank comes first (the service dropped the Start:
// the run was stopped or replaced meanwhile), it is never reported, since
// the service never counted the instance. Its pod is stopped all the
// same, and its finalizer removed.
//
// A run that this Open never started (adopted from an earlier server, or
// ended while none watched) reports every end, as the service expects
// from the instances it adopts.
type starts struct {
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

// endVerdict is what becomes of an instance's end.
type endVerdict int

const (
	reportEnd endVerdict = iota // send it on Exits
	holdEnd                     // wait for the instance's Start or Stop
	dropEnd                     // never sent: the service did not count the instance
)

func newStarts() *starts {
	return &starts{runs: map[string]bool{}, started: map[rankKey]bool{}, stopped: map[rankKey]bool{}}
}

// start records that the instance's Start was applied.
func (s *starts) start(run string, rank int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.runs[run] = true
	s.started[rankKey{run, rank}] = true
}

// adopt records an instance that Adopt reported running.
func (s *starts) adopt(run string, rank int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.started[rankKey{run, rank}] = true
}

// stop records a Stop of the instance.
func (s *starts) stop(run string, rank int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if k := (rankKey{run, rank}); s.runs[run] && !s.started[k] {
		s.stopped[k] = true
	}
}

// verdict says what to do with the end of the instance.
func (s *starts) verdict(run string, rank int) endVerdict {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := rankKey{run, rank}
	switch {
	case !s.runs[run] || s.started[k]:
		return reportEnd
	case s.stopped[k]:
		return dropEnd
	default:
		return holdEnd
	}
}

// requeue queues the pods of one instance of a run, those deleted before
// their end was reported too, whose end may have waited for its Start.
func (in *instances) requeue(run string, instance int) {
	for _, p := range in.instancePods(run, instance) {
		in.enqueue(p)
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	for key, p := range in.gone {
		if p.Annotations[RunKeyAnnotation] == run && p.Annotations[completionIndex] == strconv.Itoa(instance) {
			in.queue.Add(key)
		}
	}
}
