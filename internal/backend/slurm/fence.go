package slurm

import (
	"errors"
	"hash/fnv"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"capblock/internal/core"
)

// The version fence (argued in doc.go). Every write of a block's
// reservation records the block's version: in Slurm, in the
// reservation's BurstBuffer field (versionMark), where the cluster has no
// burst buffer plugin; and always in the backend's memory (held). A
// write of an older version than either record is refused.

// versionMark begins the BurstBuffer field of a reservation that
// capblock wrote, the block's version after it: "capblock:v=7". Slurm
// 22.05 has no comment field on reservations (scontrol refuses
// Comment=); without a burst buffer plugin (BurstBufferType unset)
// slurmctld keeps the field as given, saves it with its state and
// prints it, and nothing reads it.
const versionMark = "capblock:v="

// versionArg records version v in a reservation, as scontrol takes it.
func versionArg(v int64) string {
	return "BurstBuffer=" + versionMark + strconv.FormatInt(v, 10)
}

// parseVersion reads a reservation's BurstBuffer field; ok is false when
// it holds no version of capblock's.
func parseVersion(field string) (v int64, ok bool) {
	rest, found := strings.CutPrefix(field, versionMark)
	if !found {
		return 0, false
	}
	v, err := strconv.ParseInt(rest, 10, 64)
	return v, err == nil
}

// versionsInSlurm reports whether a cluster whose configuration says
// burstBufferType may keep versions in its reservations' BurstBuffer
// field: only where no burst buffer plugin would read it as a request.
func versionsInSlurm(burstBufferType string) bool {
	return burstBufferType == "" || burstBufferType == "(null)"
}

// heldVersion is what the backend's memory holds of a reservation's
// version: the highest version this process wrote or read of it, and
// when it last did.
type heldVersion struct {
	version int64
	at      time.Time
}

// hold notes that the reservation named name holds (or held, once
// released) version v, if no higher one is noted.
func (b *Backend) hold(name string, v int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if h, ok := b.held[name]; !ok || v >= h.version {
		b.held[name] = heldVersion{version: v, at: b.cfg.Now()}
	}
}

// heldFor is the version noted for the reservation named name.
func (b *Backend) heldFor(name string) (heldVersion, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	h, ok := b.held[name]
	return h, ok
}

// staleError is a write refused by the fence: the engine holds version
// held of the reservation, newer than the write's.
type staleError struct {
	name        string
	write, held int64
}

func (e *staleError) Error() string {
	return "reservation " + e.name + " holds version " + strconv.FormatInt(e.held, 10) +
		" of its block; a write of version " + strconv.FormatInt(e.write, 10) + " is refused"
}

// checkHeld refuses a write of blk older than the version this process
// noted for its reservation.
func (b *Backend) checkHeld(blk core.Block) error {
	if h, ok := b.heldFor(blk.ID); ok && blk.Version < h.version {
		return &staleError{name: blk.ID, write: blk.Version, held: h.version}
	}
	return nil
}

// checkRecorded refuses the write of want over have when have records a
// newer version.
func checkRecorded(have, want reservation) error {
	if have.versioned && have.version > want.version {
		return &staleError{name: want.name, write: want.version, held: have.version}
	}
	return nil
}

// fenced ends an action: a write refused by the fence is logged and
// counted, and the action reports success. Why not a failure: the engine
// already holds a later version of the block, written by a later action;
// no retry can apply this one (versions only grow), and recording it
// failed (ErrPermanent) would show an operator a fault where the fence
// did its job. The counter and the warning are where a leader that lost
// its lease, and still writes, shows.
func (b *Backend) fenced(action string, blk core.Block, err error) error {
	var stale *staleError
	if !errors.As(err, &stale) {
		return err
	}
	b.staleWrites.Add(1)
	b.log.Warn("refused a stale write of a block's Slurm reservation: the engine holds a later version",
		"action", action, "block", blk.ID, "version", stale.write, "held", stale.held)
	return nil
}

// StaleWrites is how many writes the version fence refused since New.
func (b *Backend) StaleWrites() int64 { return b.staleWrites.Load() }

// blockLocks serialise the writes of one reservation between the
// outbox's actions and the convergence's repairs, so that a repair
// never interleaves with an action's read and write. A lock covers the
// names that hash to it: a fixed set, since a lock per name would have
// to be forgotten some time, and one forgotten while held would let two
// writers in.
type blockLocks [64]sync.Mutex

func (l *blockLocks) of(name string) *sync.Mutex {
	h := fnv.New32a()
	h.Write([]byte(name))
	return &l[h.Sum32()%uint32(len(l))]
}

// Collectors are the backend's metrics, for /metrics: the writes the
// fence refused.
func (b *Backend) Collectors() []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "capblock_engine_stale_writes_refused_total",
			Help: "Writes of a block's Slurm reservation refused because the engine holds a later version of the block."},
			func() float64 { return float64(b.staleWrites.Load()) }),
	}
}
