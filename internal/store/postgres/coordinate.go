package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"capblock/internal/core"
	"capblock/internal/store"
)

// blocksChannel is the NOTIFY channel on which every commit names the
// blocks it changed.
const (
	blocksChannel = "capblock_blocks"
	// maxPayload keeps NOTIFY payloads under PostgreSQL's 8000-byte limit.
	maxPayload = 7000
	// rewatchAfter is how long a broken watch waits before reconnecting.
	rewatchAfter = 500 * time.Millisecond
)

var _ store.Coordinator = (*Store)(nil)

// queueNotify tells the watches of the blocks a change leaves, on
// blocksChannel. NOTIFY is transactional: listeners hear it when, and only
// if, the change commits, in commit order, and a transaction's notices in
// the order it sent them. A notice carries each block as the committing
// replica indexes it, so that the others need not read it back, unless
// the block is too large for a payload. A change that stores node health
// says so first, so that a replica knows a node failed before it sees the
// blocks leave it; one that stores actions says so last, so that the
// leader's worker looks for due actions.
func (w *commitWriter) queueNotify(c store.Change) {
	if len(c.NodeHealth) > 0 {
		w.exec("notifying replicas", nil, `SELECT pg_notify($1, $2)`, blocksChannel, healthNotice)
	}
	var bs []core.Block
	for _, b := range c.Insert {
		b.Version = 1
		bs = append(bs, b)
	}
	for _, u := range c.Update {
		b := u.Block
		b.Version = u.ExpectedVersion + 1
		if sb, ok := w.stored[b.ID]; ok { // what the commit leaves stored
			b.Start, b.Placements = sb.start, sb.placements
		}
		bs = append(bs, b)
	}
	for _, payload := range encodeNotices(bs) {
		w.exec("notifying replicas", nil, `SELECT pg_notify($1, $2)`, blocksChannel, payload)
	}
	if len(c.Actions) > 0 {
		w.exec("notifying replicas", nil, `SELECT pg_notify($1, $2)`, blocksChannel, actionsNotice)
	}
}

// A payload on blocksChannel is either "!" and a barrier's token,
// accountsNotice, healthNotice, actionsNotice, clockNotice, or a JSON
// array of noticeItem.
const (
	barrierMark    = "!"
	accountsNotice = "#accounts"
	healthNotice   = "#health"
	actionsNotice  = "#actions"
	clockNotice    = "#clock"
)

// noticeItem is a block in a notice, as read. Block is decoded only by a
// reader that does not hold the block at that version already (most
// notices a replica reads are of its own commits).
type noticeItem struct {
	ID      string          `json:"id"`
	Version int64           `json:"v"`
	Block   json.RawMessage `json:"b,omitempty"`
}

// noticeItemOut is a noticeItem as written, its block encoded with it.
type noticeItemOut struct {
	ID      string          `json:"id"`
	Version int64           `json:"v"`
	Block   json.RawMessage `json:"b,omitempty"` // core.EncodeBlockDoc
}

// encodeNotices packs bs into payloads of at most maxPayload bytes, each
// block with its contents when they fit in one payload.
func encodeNotices(bs []core.Block) []string {
	var (
		out   []string
		items []string
		size  int // of items, with the brackets and commas around them
	)
	flush := func() {
		if len(items) > 0 {
			out = append(out, "["+strings.Join(items, ",")+"]")
			items, size = nil, 0
		}
	}
	for _, b := range bs {
		doc, err := core.EncodeBlockDoc(b)
		var item []byte
		if err == nil {
			item, err = json.Marshal(noticeItemOut{ID: b.ID, Version: b.Version, Block: doc})
		}
		if err != nil || len(item)+2 > maxPayload {
			item, _ = json.Marshal(noticeItemOut{ID: b.ID, Version: b.Version}) // readers load it
		}
		if size+len(item)+2 > maxPayload {
			flush()
		}
		items = append(items, string(item))
		size += len(item) + 1
	}
	flush()
	return out
}

// decodeNotice reads a payload of blocksChannel.
func decodeNotice(payload string) (store.Notice, error) {
	if token, ok := strings.CutPrefix(payload, barrierMark); ok {
		return store.Notice{Barrier: token}, nil
	}
	switch payload {
	case accountsNotice:
		return store.Notice{Accounts: true}, nil
	case healthNotice:
		return store.Notice{Health: true}, nil
	case actionsNotice:
		return store.Notice{Actions: true}, nil
	case clockNotice:
		return store.Notice{Clock: true}, nil
	}
	var items []noticeItem
	if err := json.Unmarshal([]byte(payload), &items); err != nil {
		return store.Notice{}, fmt.Errorf("notice %.100q: %w", payload, err)
	}
	if len(items) == 0 {
		return store.Notice{}, fmt.Errorf("notice %.100q names no block", payload)
	}
	n := store.Notice{Blocks: make([]store.BlockVersion, len(items))}
	for i, it := range items {
		if it.ID == "" {
			return store.Notice{}, fmt.Errorf("notice %.100q: item %d names no block", payload, i)
		}
		n.Blocks[i] = store.BlockVersion{ID: it.ID, Version: it.Version}
		if it.Block != nil {
			n.Blocks[i].Block = func() (core.Block, error) {
				b, err := core.DecodeBlockDoc(it.Block)
				if err != nil {
					return core.Block{}, fmt.Errorf("notice of block %s: %w", it.ID, err)
				}
				if b.ID != it.ID || b.Version != it.Version {
					return core.Block{}, fmt.Errorf("notice of block %s version %d holds block %s version %d", it.ID, it.Version, b.ID, b.Version)
				}
				return b, nil
			}
		}
	}
	return n, nil
}

// execAccounts runs a statement that changes tokens, quotas or budgets
// and, in the same transaction, tells every watch so (see store.Notice).
func (s *Store) execAccounts(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	b.Queue(`SELECT pg_notify($1, $2)`, blocksChannel, accountsNotice)
	br := s.pool.SendBatch(ctx, b) // one implicit transaction
	tag, err := br.Exec()
	if err == nil {
		_, err = br.Exec()
	}
	return tag, errors.Join(err, br.Close())
}

// Barrier notifies every watch of token (see store.Coordinator). A
// commit's NOTIFY is delivered when it commits, in commit order, so the
// barrier comes after every commit that ended before it was sent.
func (s *Store) Barrier(ctx context.Context, token string) error {
	if _, err := s.pool.Exec(ctx, `SELECT pg_notify($1, $2)`, blocksChannel, barrierMark+token); err != nil {
		return fmt.Errorf("sending barrier: %w", err)
	}
	return nil
}

// WatchBlocks listens on a dedicated connection for the blocks that
// commits change, reconnecting when it breaks. Each time it starts
// listening, the first time too, it reports a Lost notice: commits made
// before (while the service built its index, or while the connection was
// down) were not heard, and only a reload after LISTEN misses none.
func (s *Store) WatchBlocks(ctx context.Context) <-chan store.Notice {
	out := make(chan store.Notice, 64)
	go func() {
		defer close(out)
		for ctx.Err() == nil {
			_ = s.listen(ctx, out) // the service logs nothing here: the next Lost notice tells it to reload
			if ctx.Err() != nil {
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

func (s *Store) listen(ctx context.Context, out chan<- store.Notice) error {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return fmt.Errorf("connecting to listen: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+blocksChannel); err != nil {
		return fmt.Errorf("listening on %s: %w", blocksChannel, err)
	}
	select {
	case out <- store.Notice{Lost: true}:
	case <-ctx.Done():
		return ctx.Err()
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return fmt.Errorf("waiting for notifications: %w", err)
		}
		notice, err := decodeNotice(n.Payload)
		if err != nil {
			return err // only another program's NOTIFY gets here: reload
		}
		select {
		case out <- notice:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
