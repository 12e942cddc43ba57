package simulate

import (
	"context"
	"fmt"
	"time"

	"capblock/internal/core"
	"capblock/internal/store"
)

// The server dies during a commit. A commit may kill the server before
// the change is durable, or once it is and before the server answers
// (Faults.CommitCrashes). The caller sees an error, as a client whose
// connection dropped: it retries (under the same client token) on the
// server the world restarts on the same database file right after the
// step, as after opCrash (world.crash). Until then the dead server
// stores nothing and answers nothing that a live one would have to
// read from the store: every write fails, and so does the look-up of a
// client token by which a live server would find the purchase its lost
// commit stored (it would answer it; a dead one cannot). Reads of
// blocks pass: what the client reads after its error, the restarted
// server would serve the same.

// deadErr is the error of a call to the store of a server that died,
// or nil while it lives.
func (f *faultStore) deadErr(what string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.dead {
		return nil
	}
	return fmt.Errorf("%s: %w: the server died", what, errInjected)
}

// die kills the server: from now on its store calls fail, until the
// world restarts it (swap).
func (f *faultStore) die() {
	f.mu.Lock()
	f.dead, f.died = true, true
	f.mu.Unlock()
}

// takeDeath reports whether the server died since the last call.
func (f *faultStore) takeDeath() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	died := f.died
	f.died = false
	return died
}

// restartIfDied starts the server again, after a step in which it died
// during a commit.
func (w *world) restartIfDied() {
	if w.fs.takeDeath() {
		w.crash()
	}
}

// The writes a dead server does not make, and the look-up of a client
// token it does not answer; FinishAction and RetryAction check it with
// their faults (faultstore.go).

func (f *faultStore) ClaimActions(ctx context.Context, epoch int64, now time.Time, limit int) ([]core.Action, error) {
	if err := f.deadErr("claiming due actions"); err != nil {
		return nil, err
	}
	as, err := f.Full.ClaimActions(ctx, epoch, now, limit)
	f.fenced("claiming due actions", epoch, err)
	return as, err
}

func (f *faultStore) FailAction(ctx context.Context, epoch int64, id string, at time.Time, lastErr string) error {
	if err := f.deadErr("recording action " + id + " failed"); err != nil {
		return err
	}
	err := f.Full.FailAction(ctx, epoch, id, at, lastErr)
	f.fenced("failing action "+id, epoch, err)
	return err
}

func (f *faultStore) Idempotency(ctx context.Context, team, token string) (store.IdempotencyRecord, error) {
	if err := f.deadErr("looking up a client token"); err != nil {
		return store.IdempotencyRecord{}, err
	}
	return f.Full.Idempotency(ctx, team, token)
}
