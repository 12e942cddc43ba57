package store

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Group commit. Each commit pays for a transaction and its flush to disk,
// which cost more than the change itself; commits that arrive while
// another is being written share the next transaction instead. There is
// no timer: a commit that finds a writer idle leads a group of itself
// at once, as fast as alone; commits that arrive while every writer is
// busy queue, and when a group is durable the first of them leads the
// next group, of every commit queued by then (up to the group's Max). A leader leads
// one group and returns with its answer: no caller waits on others' work
// longer than one group.
//
// The drivers write a group and answer each of its requests; each says
// how a change that fails inside a group fails alone.

// CommitGroup queues the commits of one writer. Make it with
// NewCommitGroup.
type CommitGroup[R any] struct {
	// Max is the most requests one group takes.
	Max int
	// Writers is the most groups written at once (at least 1): SQLite
	// has one writer; PostgreSQL takes several transactions at once.
	Writers int
	// sizes counts the groups by the requests they took.
	sizes prometheus.Histogram

	mu    sync.Mutex
	queue []*groupEntry[R]
	busy  int // groups being written
	// largest is the most requests a group has taken so far.
	largest int
}

// NewCommitGroup returns a queue whose groups take at most max requests,
// written by at most writers leaders at once.
func NewCommitGroup[R any](max, writers int) *CommitGroup[R] {
	return &CommitGroup[R]{Max: max, Writers: writers, sizes: prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "capblock_store_commit_group_changes",
		Help:    "Transactions of this replica's commits, by the changes each took (group commit: changes that arrive together share one).",
		Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128},
	})}
}

// Collector is the histogram of the groups' sizes.
func (g *CommitGroup[R]) Collector() prometheus.Collector { return g.sizes }

// groupEntry is one request waiting for its group.
type groupEntry[R any] struct {
	r R
	// wake receives once: when the request is answered, or when it is to
	// lead the next group, which lead then holds.
	wake chan struct{}
	lead []*groupEntry[R]
}

// Do returns once r is answered: it joins the next group, leading it
// when its turn comes, and write, called by the group's leader, writes
// the group and answers each request of it, r included.
func (g *CommitGroup[R]) Do(r R, write func(group []R)) {
	e := &groupEntry[R]{r: r, wake: make(chan struct{}, 1)}
	g.mu.Lock()
	g.queue = append(g.queue, e)
	var batch []*groupEntry[R]
	if g.busy >= max(g.Writers, 1) {
		g.mu.Unlock()
		<-e.wake
		if e.lead == nil {
			return // answered by another leader's group
		}
		batch = e.lead
	} else {
		// No group waits while a writer is idle: the queue is e alone.
		g.busy++
		batch = g.take()
		g.mu.Unlock()
	}
	if g.sizes != nil {
		g.sizes.Observe(float64(len(batch)))
	}
	group := make([]R, len(batch))
	for i, o := range batch {
		group[i] = o.r
	}
	write(group)

	// The next group, if any, is handed whole to its leader, so that no
	// other writer takes it too.
	g.mu.Lock()
	var next *groupEntry[R]
	if len(g.queue) > 0 {
		next = g.queue[0]
		next.lead = g.take()
	} else {
		g.busy--
	}
	g.mu.Unlock()
	if next != nil {
		next.wake <- struct{}{}
	}
	for _, o := range batch {
		if o != e {
			o.wake <- struct{}{}
		}
	}
}

// take removes the next group from the queue; g.mu is held.
func (g *CommitGroup[R]) take() []*groupEntry[R] {
	n := min(len(g.queue), max(g.Max, 1))
	batch := g.queue[:n:n]
	g.queue = g.queue[n:]
	g.largest = max(g.largest, n)
	return batch
}

// Largest is the most requests a group has taken so far.
func (g *CommitGroup[R]) Largest() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.largest
}
