package postgres

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"capblock/internal/store"
)

// blocksChannel is the NOTIFY channel on which every commit names the
// blocks it changed; leaderLockKey is the advisory lock of the replica
// that runs the reconciler.
const (
	blocksChannel = "capblock_blocks"
	leaderLockKey = 0x6362_1000
	// maxPayload keeps NOTIFY payloads under PostgreSQL's 8000-byte limit.
	maxPayload = 7000
	// rewatchAfter is how long a broken watch waits before reconnecting.
	rewatchAfter = 500 * time.Millisecond
)

var _ store.Coordinator = (*Store)(nil)

// queueNotify names the blocks of a change on blocksChannel. NOTIFY is
// transactional: listeners hear it when, and only if, the change commits.
func (w *commitWriter) queueNotify(c store.Change) {
	var ids []string
	for _, b := range c.Insert {
		ids = append(ids, b.ID)
	}
	for _, u := range c.Update {
		ids = append(ids, u.Block.ID)
	}
	for len(ids) > 0 {
		n, size := 0, 0
		for n < len(ids) && size+len(ids[n])+1 <= maxPayload {
			size += len(ids[n]) + 1
			n++
		}
		w.exec("notifying replicas", nil, `SELECT pg_notify($1, $2)`, blocksChannel, strings.Join(ids[:n], ","))
		ids = ids[n:]
	}
}

// WatchBlocks listens on a dedicated connection for the blocks that
// commits change, reconnecting when it breaks.
func (s *Store) WatchBlocks(ctx context.Context) <-chan []string {
	out := make(chan []string, 64)
	go func() {
		defer close(out)
		for ctx.Err() == nil {
			err := s.listen(ctx, out)
			if ctx.Err() != nil {
				return
			}
			_ = err // the service logs nothing here: a nil batch tells it to reload
			select {
			case out <- nil:
			case <-ctx.Done():
				return
			}
			select {
			case <-time.After(rewatchAfter):
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

func (s *Store) listen(ctx context.Context, out chan<- []string) error {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return fmt.Errorf("connecting to listen: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+blocksChannel); err != nil {
		return fmt.Errorf("listening on %s: %w", blocksChannel, err)
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return fmt.Errorf("waiting for notifications: %w", err)
		}
		select {
		case out <- strings.Split(n.Payload, ","):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// TryLead takes the leader's advisory lock on a dedicated connection, so
// that the lead ends with the replica: when its process or connection
// dies, PostgreSQL releases the lock and another replica takes it.
func (s *Store) TryLead(ctx context.Context) (<-chan struct{}, func(), bool, error) {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return nil, nil, false, fmt.Errorf("connecting to take the lead: %w", err)
	}
	var got bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, int64(leaderLockKey)).Scan(&got); err != nil || !got {
		conn.Close(context.WithoutCancel(ctx))
		if err != nil {
			return nil, nil, false, fmt.Errorf("taking the lead: %w", err)
		}
		return nil, nil, false, nil
	}
	lost := make(chan struct{})
	done := make(chan struct{})
	var mu sync.Mutex // a pgx.Conn serves one caller at a time
	go func() {       // watch the connection that holds the lock
		defer close(lost)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				mu.Lock()
				pctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				err := conn.Ping(pctx)
				cancel()
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}
	}()
	var once sync.Once
	release := func() {
		once.Do(func() {
			close(done)
			mu.Lock()
			defer mu.Unlock()
			conn.Close(context.Background()) // closing the session releases the lock
		})
	}
	return lost, release, true, nil
}
