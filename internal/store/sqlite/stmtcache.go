package sqlite

import (
	"container/list"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"sync"

	sqlitedriver "modernc.org/sqlite"
)

// Statements are compiled once per connection. database/sql hands a
// query the driver's connection can run directly (QueryerContext,
// ExecerContext) to it as text, and SQLite parses and plans the text on
// every call: on a commit or a read of a few rows, more time than the
// work itself. A connection opened through openCached hides those two
// methods, so database/sql prepares each query, and answers a prepare
// with the statement it compiled for the same text before, while no one
// else uses it. A statement in use (its rows still open, or held by a
// sql.Stmt) is not shared: a second user of the same text gets a
// statement of its own, closed when it is done.

// stmtCacheSize is how many statements a connection keeps compiled; the
// least recently used beyond it are closed. capblock's queries number a
// few hundred texts, most of them rare.
const stmtCacheSize = 256

// openCached opens a database/sql pool on the SQLite file of dsn whose
// connections keep their statements compiled.
func openCached(dsn string) (*sql.DB, error) {
	base, err := sqlitedriver.NewConnector(dsn)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(cachingConnector{base}), nil
}

type cachingConnector struct{ base driver.Connector }

func (c cachingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.base.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return newCachedConn(conn), nil
}

func (c cachingConnector) Driver() driver.Driver { return c.base.Driver() }

// cachedConn is a driver connection whose prepared statements are kept
// by their text. It forwards every optional interface of the driver's
// connection but QueryerContext and ExecerContext.
type cachedConn struct {
	inner driver.Conn
	mu    sync.Mutex
	stmts map[string]*list.Element // of *cachedStmt, most recent first
	lru   list.List
}

func newCachedConn(inner driver.Conn) *cachedConn {
	return &cachedConn{inner: inner, stmts: map[string]*list.Element{}}
}

// Unwrap is the driver's connection (as the driver's own helpers expect
// of a wrapper).
func (c *cachedConn) Unwrap() driver.Conn { return c.inner }

func (c *cachedConn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

func (c *cachedConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	c.mu.Lock()
	if e, ok := c.stmts[query]; ok {
		s := e.Value.(*cachedStmt)
		if !s.busy {
			s.busy = true
			c.lru.MoveToFront(e)
			c.mu.Unlock()
			return s, nil
		}
		c.mu.Unlock()
		return c.prepareInner(ctx, query) // in use: one of its own
	}
	c.mu.Unlock()
	ds, err := c.prepareInner(ctx, query)
	if err != nil {
		return nil, err
	}
	s := &cachedStmt{Stmt: ds, conn: c, query: query, busy: true}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.stmts[query]; ok { // cannot happen: the connection is one caller's at a time
		return ds, nil
	}
	c.stmts[query] = c.lru.PushFront(s)
	c.evict()
	return s, nil
}

func (c *cachedConn) prepareInner(ctx context.Context, query string) (driver.Stmt, error) {
	if p, ok := c.inner.(driver.ConnPrepareContext); ok {
		return p.PrepareContext(ctx, query)
	}
	return c.inner.Prepare(query)
}

// evict closes the least recently used statements not in use beyond
// stmtCacheSize. Callers hold mu.
func (c *cachedConn) evict() {
	for e := c.lru.Back(); e != nil && c.lru.Len() > stmtCacheSize; {
		prev := e.Prev()
		if s := e.Value.(*cachedStmt); !s.busy {
			c.lru.Remove(e)
			delete(c.stmts, s.query)
			s.Stmt.Close() // an error closing a statement leaves nothing to do
		}
		e = prev
	}
}

// Close closes the kept statements, then the connection.
func (c *cachedConn) Close() error {
	c.mu.Lock()
	var errs []error
	for e := c.lru.Front(); e != nil; e = e.Next() {
		s := e.Value.(*cachedStmt)
		s.closed = true
		if err := s.Stmt.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	c.stmts, c.lru = map[string]*list.Element{}, list.List{}
	c.mu.Unlock()
	return errors.Join(append(errs, c.inner.Close())...)
}

func (c *cachedConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *cachedConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if b, ok := c.inner.(driver.ConnBeginTx); ok {
		return b.BeginTx(ctx, opts)
	}
	return c.inner.Begin()
}

func (c *cachedConn) Ping(ctx context.Context) error {
	if p, ok := c.inner.(driver.Pinger); ok {
		return p.Ping(ctx)
	}
	return nil
}

func (c *cachedConn) ResetSession(ctx context.Context) error {
	if r, ok := c.inner.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

func (c *cachedConn) IsValid() bool {
	if v, ok := c.inner.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

func (c *cachedConn) CheckNamedValue(nv *driver.NamedValue) error {
	if ch, ok := c.inner.(driver.NamedValueChecker); ok {
		return ch.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

// cachedStmt is a kept statement: closing it hands it back to its
// connection, which closes it when it evicts it or closes.
type cachedStmt struct {
	driver.Stmt
	conn   *cachedConn
	query  string
	busy   bool // guarded by conn.mu
	closed bool // guarded by conn.mu: the connection closed it
}

func (s *cachedStmt) Close() error {
	s.conn.mu.Lock()
	defer s.conn.mu.Unlock()
	s.busy = false
	if _, kept := s.conn.stmts[s.query]; !kept && !s.closed {
		s.closed = true
		return s.Stmt.Close()
	}
	s.conn.evict()
	return nil
}

func (s *cachedStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	if e, ok := s.Stmt.(driver.StmtExecContext); ok {
		return e.ExecContext(ctx, args)
	}
	return s.Stmt.Exec(values(args))
}

func (s *cachedStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	if q, ok := s.Stmt.(driver.StmtQueryContext); ok {
		return q.QueryContext(ctx, args)
	}
	return s.Stmt.Query(values(args))
}

func values(args []driver.NamedValue) []driver.Value {
	vs := make([]driver.Value, len(args))
	for i, a := range args {
		vs[i] = a.Value
	}
	return vs
}

func (s *cachedStmt) CheckNamedValue(nv *driver.NamedValue) error {
	if ch, ok := s.Stmt.(driver.NamedValueChecker); ok {
		return ch.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}
