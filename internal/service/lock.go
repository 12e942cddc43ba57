package service

import (
	"bytes"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"

	"capblock/internal/store"
)

// indexLock is the service's lock over the index (Service.mu): a
// read-write lock that decisions take exclusively and reads take shared.
// A rebuild of the index may also hold it apart (letReadersIn): readers
// go on, while every other exclusive locker waits until it is released.
//
// Nothing that waits on the store may run while it is held exclusively:
// every search and every other decision waits behind it. So the package's
// tests turn lockTracking on, and the lock then records which goroutine
// holds it exclusively; the tests' store (wrapped by checkStore in New)
// asks heldExclusively before each call and fails the test when the
// caller holds it. In production the tracking is off and costs one atomic
// load per Lock and Unlock.
type indexLock struct {
	// writer is held with rw exclusively, and alone while the lock is
	// kept apart: whoever holds it is the one who may change the index.
	writer sync.Mutex
	rw     sync.RWMutex
	holder uint64 // the goroutine holding rw exclusively, while tracking
}

// lockTracking turns on the recording of the goroutines that hold an
// indexLock exclusively. Only tests turn it on, before any lock is taken.
var lockTracking atomic.Bool

// exclusiveHolders counts, while tracking, the indexLocks that each
// goroutine holds exclusively, by goroutine id.
var exclusiveHolders struct {
	mu sync.Mutex
	by map[uint64]int
}

// checkStore, when the package's tests set it, wraps the store that New
// is given, so that every store call can be checked against the lock.
var checkStore func(store.Full) store.Full

func (l *indexLock) Lock() {
	l.writer.Lock()
	l.shutReadersOut()
}

func (l *indexLock) Unlock() {
	l.letReadersIn()
	l.writer.Unlock()
}

func (l *indexLock) RLock()   { l.rw.RLock() }
func (l *indexLock) RUnlock() { l.rw.RUnlock() }

// letReadersIn turns the exclusive hold of the lock into a hold apart:
// readers take it shared again, while every other Lock still waits,
// until shutReadersOut takes it back exclusively and Unlock releases it.
// Nothing else changes the index meanwhile, and the holder may read the
// store.
func (l *indexLock) letReadersIn() {
	if lockTracking.Load() && l.holder != 0 {
		exclusiveHolders.mu.Lock()
		if exclusiveHolders.by[l.holder]--; exclusiveHolders.by[l.holder] <= 0 {
			delete(exclusiveHolders.by, l.holder)
		}
		exclusiveHolders.mu.Unlock()
		l.holder = 0
	}
	l.rw.Unlock()
}

// shutReadersOut takes back exclusively the lock that letReadersIn held
// apart.
func (l *indexLock) shutReadersOut() {
	l.rw.Lock()
	if lockTracking.Load() {
		l.holder = goroutineID()
		exclusiveHolders.mu.Lock()
		if exclusiveHolders.by == nil {
			exclusiveHolders.by = map[uint64]int{}
		}
		exclusiveHolders.by[l.holder]++
		exclusiveHolders.mu.Unlock()
	}
}

// heldExclusively reports whether the calling goroutine holds an
// indexLock exclusively; it is always false while tracking is off.
func heldExclusively() bool {
	if !lockTracking.Load() {
		return false
	}
	g := goroutineID()
	exclusiveHolders.mu.Lock()
	defer exclusiveHolders.mu.Unlock()
	return exclusiveHolders.by[g] > 0
}

// goroutineID is the calling goroutine's id, read from the first line of
// its stack ("goroutine 42 [running]:"). It is slow, and meant for the
// tracking that tests turn on only.
func goroutineID() uint64 {
	var buf [64]byte
	line := buf[:runtime.Stack(buf[:], false)]
	line = bytes.TrimPrefix(line, []byte("goroutine "))
	if i := bytes.IndexByte(line, ' '); i > 0 {
		line = line[:i]
	}
	id, err := strconv.ParseUint(string(line), 10, 64)
	if err != nil {
		panic("reading the goroutine id from " + string(buf[:]) + ": " + err.Error())
	}
	return id
}

// withLock runs fn with mu held exclusively, and frees it however fn
// ends, a panic included: a request that panics answers 500, and leaves
// no lock held for every later request to hang on.
func (s *Service) withLock(fn func() error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fn()
}
