package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// allocChunk is the most allocation rows one INSERT statement writes.
// Inserts of allocChunk, allocChunk/2, …, 1 rows are written, so a block
// of r rows takes r/allocChunk statements plus one per bit set in
// r%allocChunk: a purchase of two whole 8-GPU nodes takes one.
const allocChunk = 64

// allocationInserts are the texts of those inserts, by rows. They are
// not prepared with the others: the connection's statement cache
// compiles each size the first time a commit needs it, since a fleet of
// 8-GPU nodes never uses the largest (whose 388 parameters take longer
// to compile than all the other statements together), and a restart
// would compile them for nothing.
var allocationInserts = func() map[int]string {
	m := map[int]string{}
	for n := allocChunk; n >= 1; n /= 2 {
		m[n] = allocationInsertSQL(n)
	}
	return m
}()

// writeStmts are the statements of Commit, prepared once on the writer.
type writeStmts struct {
	insertIdempotency *sql.Stmt
	insertUsed        *sql.Stmt
	insertBlock       *sql.Stmt
	selectForUpdate   *sql.Stmt
	updateBlock       *sql.Stmt
	deleteAllocations *sql.Stmt
	updateAllocations *sql.Stmt
	findOverlap       *sql.Stmt
	insertJournal     *sql.Stmt
	insertPosting     *sql.Stmt
	insertEvent       *sql.Stmt
	insertAction      *sql.Stmt
}

// findOverlapSQL finds one live allocation of another block that shares a
// GPU and intersects the time range of an allocation of block ?1. It runs
// after the change is written, so it sees the change's own new rows (two
// blocks of one change may not overlap either) and none of the rows the
// change replaced.
//
// For each allocation a of the block it reads one time of its GPU from
// allocations_taken: the first end after a's start among the other live
// allocations (n), and then the allocations ending then (o), which
// conflict when they start before a ends. Two seeks per GPU, whatever
// the number of allocations the GPU holds: the allocations that end
// later are never read.
//
// That is exact. The live allocations of a GPU do not overlap before the
// change (the invariant this check keeps), and Commit checks every live
// allocation that the change writes (a new block's, a moved one's, one
// made longer or live again). Say the change leaves two live allocations
// x and y of a GPU overlapping, x ending no later than y. If the change
// wrote y, y's check finds a first end no later than x's, so an
// allocation that ends after y starts and starts before y ends: a
// conflict. Otherwise the change wrote x; if x's check finds no
// conflict, the allocation it found, f, starts at or after x's end and
// ends no later than y's, so it lies inside y: it overlaps y, the change
// wrote it, and f takes x's place. The starts grow, so some check ends
// in a conflict.
const findOverlapSQL = `SELECT o.block_id, a.node, a.gpu
	FROM allocations a
	JOIN allocations o
	  ON o.node = a.node AND o.gpu = a.gpu AND o.live = 1
	 AND o.end_time = (
	     SELECT n.end_time FROM allocations n
	     WHERE n.node = a.node AND n.gpu = a.gpu AND n.live = 1
	       AND n.end_time > a.start_time AND n.block_id <> a.block_id
	     ORDER BY n.end_time LIMIT 1)
	 AND o.start_time < a.end_time
	 AND o.block_id <> a.block_id
	WHERE a.block_id = ?1
	LIMIT 1`

func prepareWriteStmts(ctx context.Context, db *sql.DB) (*writeStmts, error) {
	ws := &writeStmts{}
	p := preparer{ctx: ctx, db: db}
	ws.insertIdempotency = p.prepare(`INSERT INTO idempotency
		(team, client_token, request_hash, subject, created_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (team, client_token) DO NOTHING`)
	ws.insertUsed = p.prepare(`INSERT INTO used_offerings (hash, expires_at) VALUES (?, ?)
		ON CONFLICT (hash) DO NOTHING`)
	ws.insertBlock = p.prepare(`INSERT INTO blocks (` + blockColumns + `)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?)`)
	ws.selectForUpdate = p.prepare(`SELECT start_time, end_time, state, version FROM blocks WHERE id = ?`)
	ws.updateBlock = p.prepare(`UPDATE blocks SET name = ?, state = ?, end_time = ?, tags = ?,
		warned = ?, terminating = ?, fee_minor = ?, fee_currency = ?, lending = ?,
		placements = coalesce(?, placements), version = version + 1
		WHERE id = ? AND version = ?`)
	ws.deleteAllocations = p.prepare(`DELETE FROM allocations WHERE block_id = ?`)
	ws.updateAllocations = p.prepare(`UPDATE allocations SET end_time = ?, live = ? WHERE block_id = ?`)
	ws.findOverlap = p.prepare(findOverlapSQL)
	ws.insertJournal = p.prepare(`INSERT INTO journals (id, time, kind, subject, instance_type, currency)
		VALUES (?, ?, ?, ?, ?, ?)`)
	ws.insertPosting = p.prepare(`INSERT INTO postings (journal, n, account, team, kind, time, amount_minor, on_demand_minor, subject)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	ws.insertEvent = p.prepare(`INSERT INTO events (id, time, type, subject, team, data)
		VALUES (?, ?, ?, ?, ?, ?)`)
	ws.insertAction = p.prepare(`INSERT INTO actions (` + actionColumns + `)
		VALUES (?, ?, ?, ?, ?, 'pending', 0, ?, '', ?, NULL)`)
	if p.err != nil {
		ws.close()
		return nil, p.err
	}
	return ws, nil
}

// allocationInsertSQL inserts n allocation rows: parameters block id,
// start, end, live, then node and GPU of each row.
func allocationInsertSQL(n int) string {
	var q strings.Builder
	q.WriteString(`INSERT INTO allocations (block_id, start_time, end_time, live, node, gpu) VALUES `)
	for i := range n {
		if i > 0 {
			q.WriteByte(',')
		}
		fmt.Fprintf(&q, "(?1, ?2, ?3, ?4, ?%d, ?%d)", 5+2*i, 6+2*i)
	}
	return q.String()
}

// allocationChunk returns the size of the next INSERT for rows remaining
// allocation rows: the largest prepared size that fits.
func allocationChunk(rows int) int {
	n := allocChunk
	for n > rows {
		n /= 2
	}
	return n
}

func (ws *writeStmts) close() error {
	return closeAll(ws.insertIdempotency, ws.insertUsed, ws.insertBlock, ws.selectForUpdate,
		ws.updateBlock, ws.deleteAllocations, ws.updateAllocations, ws.findOverlap,
		ws.insertJournal, ws.insertPosting, ws.insertEvent, ws.insertAction)
}

// readStmts are the fixed queries of the read methods, prepared on the
// read pool.
type readStmts struct {
	getBlock    *sql.Stmt
	idempotency *sql.Stmt
	events      *sql.Stmt
	journals    *sql.Stmt
}

func prepareReadStmts(ctx context.Context, db *sql.DB) (*readStmts, error) {
	p := preparer{ctx: ctx, db: db}
	rs := &readStmts{
		getBlock: p.prepare(`SELECT ` + blockColumns + ` FROM blocks WHERE id = ?`),
		idempotency: p.prepare(`SELECT request_hash, subject, created_at FROM idempotency
			WHERE team = ? AND client_token = ?`),
		events: p.prepare(`SELECT seq, id, time, type, subject, team, data FROM events
			WHERE seq > ? ORDER BY seq LIMIT ?`),
		journals: p.prepare(journalsSQL),
	}
	if p.err != nil {
		rs.close()
		return nil, p.err
	}
	return rs, nil
}

func (rs *readStmts) close() error {
	return closeAll(rs.getBlock, rs.idempotency, rs.events, rs.journals)
}

// preparer prepares statements until the first error, which it keeps.
type preparer struct {
	ctx context.Context
	db  *sql.DB
	err error
}

func (p *preparer) prepare(query string) *sql.Stmt {
	if p.err != nil {
		return nil
	}
	st, err := p.db.PrepareContext(p.ctx, query)
	if err != nil {
		p.err = fmt.Errorf("preparing %q: %w", strings.Join(strings.Fields(query), " "), err)
	}
	return st
}

func closeAll(stmts ...*sql.Stmt) error {
	var errs []error
	for _, st := range stmts {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	return errors.Join(errs...)
}
