package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// writeStmts are the statements of Commit, prepared once on the writer.
type writeStmts struct {
	insertIdempotency *sql.Stmt
	insertUsed        *sql.Stmt
	insertBlock       *sql.Stmt
	selectForUpdate   *sql.Stmt
	updateBlock       *sql.Stmt
	insertJournal     *sql.Stmt
	insertPosting     *sql.Stmt
	insertEvent       *sql.Stmt
	insertAction      *sql.Stmt
}

func prepareWriteStmts(ctx context.Context, db *sql.DB) (*writeStmts, error) {
	ws := &writeStmts{}
	p := preparer{ctx: ctx, db: db}
	ws.insertIdempotency = p.prepare(`INSERT INTO idempotency
		(team, client_token, request_hash, subject, created_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (team, client_token) DO NOTHING`)
	ws.insertUsed = p.prepare(`INSERT INTO used_offerings (hash, expires_at) VALUES (?, ?)
		ON CONFLICT (hash) DO NOTHING`)
	ws.insertBlock = p.prepare(`INSERT INTO blocks (` + blockColumns + `)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?)`)
	ws.selectForUpdate = p.prepare(`SELECT start_time, end_time, state, version, placements FROM blocks WHERE id = ?`)
	ws.updateBlock = p.prepare(`UPDATE blocks SET name = ?, state = ?, end_time = ?, tags = ?,
		warned = ?, terminating = ?, fee_minor = ?, fee_currency = ?, lending = ?,
		placements = coalesce(?, placements), version = version + 1
		WHERE id = ? AND version = ?`)
	ws.insertJournal = p.prepare(`INSERT INTO journals (id, time, kind, subject, instance_type, currency)
		VALUES (?, ?, ?, ?, ?, ?)`)
	ws.insertPosting = p.prepare(`INSERT INTO postings (journal, n, account, team, kind, time, amount_minor, on_demand_minor, subject)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	ws.insertEvent = p.prepare(`INSERT INTO events (id, time, type, subject, team, data)
		VALUES (?, ?, ?, ?, ?, ?)`)
	ws.insertAction = p.prepare(`INSERT INTO actions (` + actionColumns + `)
		VALUES (?, ?, ?, ?, ?, 'pending', 0, ?, '', ?, NULL, ?)`)
	if p.err != nil {
		ws.close()
		return nil, p.err
	}
	return ws, nil
}

func (ws *writeStmts) close() error {
	return closeAll(ws.insertIdempotency, ws.insertUsed, ws.insertBlock, ws.selectForUpdate,
		ws.updateBlock,
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
