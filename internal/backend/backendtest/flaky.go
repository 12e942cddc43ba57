// Package backendtest holds what tests of the engines and of their users
// share: Flaky, a backend that fails on demand and records every call,
// and Exercise, the suite that every backend must pass. The product
// binary imports neither.
package backendtest

import (
	"context"
	"errors"
	"sync"

	"capblock/internal/backend"
	"capblock/internal/core"
)

// Call is one call that a Flaky backend received, and how it ended.
type Call struct {
	Kind  core.ActionKind
	Block string
	Err   string // "" when it succeeded
}

// Flaky wraps a backend: it fails the calls it was told to fail, passes
// the others on, and records every call. It is safe for concurrent use.
type Flaky struct {
	inner backend.Backend

	mu    sync.Mutex
	fails map[core.ActionKind][]error // the errors of the next calls of a kind, in order
	calls []Call
}

// NewFlaky wraps inner, which takes every call until told otherwise.
func NewFlaky(inner backend.Backend) *Flaky {
	return &Flaky{inner: inner, fails: map[core.ActionKind][]error{}}
}

// FailNext makes the next n calls of kind fail with err.
func (f *Flaky) FailNext(kind core.ActionKind, n int, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for range n {
		f.fails[kind] = append(f.fails[kind], err)
	}
}

// Calls returns the calls so far, in the order they ended.
func (f *Flaky) Calls() []Call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Call(nil), f.calls...)
}

// Name is the wrapped backend's name.
func (f *Flaky) Name() string { return f.inner.Name() }

// Inventory passes the wrapped backend's inventory on; it is not
// failed on demand and not recorded.
func (f *Flaky) Inventory(ctx context.Context) ([]core.Node, error) { return f.inner.Inventory(ctx) }

// Activate fails when told to, else activates through the wrapped backend.
func (f *Flaky) Activate(ctx context.Context, b core.Block) error {
	return f.call(ctx, core.ActionActivate, b, f.inner.Activate)
}

// Terminate fails when told to, else terminates through the wrapped backend.
func (f *Flaky) Terminate(ctx context.Context, b core.Block) error {
	return f.call(ctx, core.ActionTerminate, b, f.inner.Terminate)
}

// Release fails when told to, else releases through the wrapped backend.
func (f *Flaky) Release(ctx context.Context, b core.Block) error {
	return f.call(ctx, core.ActionRelease, b, f.inner.Release)
}

func (f *Flaky) call(ctx context.Context, kind core.ActionKind, b core.Block, next func(context.Context, core.Block) error) error {
	f.mu.Lock()
	var err error
	if q := f.fails[kind]; len(q) > 0 {
		err, f.fails[kind] = q[0], q[1:]
	}
	f.mu.Unlock()
	if err == nil {
		err = next(ctx, b)
	}
	c := Call{Kind: kind, Block: b.ID}
	if err != nil {
		c.Err = err.Error()
	}
	f.mu.Lock()
	f.calls = append(f.calls, c)
	f.mu.Unlock()
	return err
}

// ErrInjected is a convenient error to fail calls with.
var ErrInjected = errors.New("injected failure")

var _ backend.Backend = (*Flaky)(nil)
