package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"time"

	sqlitedriver "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"capblock/internal/core"
	"capblock/internal/store"
)

// The accounts (store.Accounts) live in the tables of 0002_accounts. Their
// writes go through the single writer connection, each in its own
// autocommit statement; their reads through the read pool. Times are whole
// unix seconds, as everywhere in this driver; an unset optional time is
// NULL.

var _ store.Full = (*Store)(nil)

// CreateTeam stores a new team; a duplicate id or name is a conflict.
func (s *Store) CreateTeam(ctx context.Context, t core.Team) error {
	_, err := s.w.ExecContext(ctx, `INSERT INTO teams (id, name, created_at) VALUES (?, ?, ?)`,
		t.ID, t.Name, unixSeconds(t.CreatedAt))
	if isConstraint(err) {
		return fmt.Errorf("creating team %s: its id or name %q is taken: %w", t.ID, t.Name, store.ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("creating team %s: %w", t.ID, err)
	}
	return nil
}

// Teams lists every team, ordered by name.
func (s *Store) Teams(ctx context.Context) ([]core.Team, error) {
	teams, err := queryRows(ctx, s.r, scanTeam, `SELECT `+teamColumns+` FROM teams ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("listing teams: %w", err)
	}
	return teams, nil
}

// Team returns one team, or an error wrapping store.ErrNotFound.
func (s *Store) Team(ctx context.Context, id string) (core.Team, error) {
	t, err := scanTeam(s.r.QueryRowContext(ctx, `SELECT `+teamColumns+` FROM teams WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return core.Team{}, fmt.Errorf("team %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return core.Team{}, fmt.Errorf("reading team %s: %w", id, err)
	}
	return t, nil
}

const teamColumns = `id, name, created_at, disabled_at`

func scanTeam(r rowScanner) (core.Team, error) {
	var (
		t        core.Team
		created  int64
		disabled sql.NullInt64
	)
	if err := r.Scan(&t.ID, &t.Name, &created, &disabled); err != nil {
		return core.Team{}, err
	}
	t.CreatedAt, t.DisabledAt = fromUnix(created), fromOptional(disabled)
	return t, nil
}

// SetTeamDisabled disables a team at at, or enables it when at is zero.
func (s *Store) SetTeamDisabled(ctx context.Context, id string, at time.Time) error {
	return s.setDisabled(ctx, "teams", "team", id, at)
}

// SetUserDisabled disables a user at at, or enables it when at is zero.
func (s *Store) SetUserDisabled(ctx context.Context, id string, at time.Time) error {
	return s.setDisabled(ctx, "users", "user", id, at)
}

// setDisabled sets disabled_at of row id of table (teams or users),
// keeping an earlier time when it is already disabled.
func (s *Store) setDisabled(ctx context.Context, table, kind, id string, at time.Time) error {
	res, err := s.w.ExecContext(ctx, `UPDATE `+table+` SET disabled_at = CASE WHEN ? IS NULL THEN NULL ELSE coalesce(disabled_at, ?) END WHERE id = ?`,
		optionalTime(at), optionalTime(at), id)
	if err != nil {
		return fmt.Errorf("setting %s %s disabled: %w", kind, id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("setting %s %s disabled: %w", kind, id, err)
	}
	if n == 0 {
		return fmt.Errorf("%s %s: %w", kind, id, store.ErrNotFound)
	}
	return nil
}

// CreateUser stores a new user; a duplicate id or name is a conflict, an
// unknown team not found.
func (s *Store) CreateUser(ctx context.Context, u core.User) error {
	_, err := s.w.ExecContext(ctx, `INSERT INTO users (id, name, team, role, created_at) VALUES (?, ?, ?, ?, ?)`,
		u.ID, u.Name, u.Team, string(u.Role), unixSeconds(u.CreatedAt))
	switch {
	case isForeignKey(err):
		return fmt.Errorf("creating user %s: team %s does not exist: %w", u.ID, u.Team, store.ErrNotFound)
	case isConstraint(err):
		return fmt.Errorf("creating user %s: its id or name %q is taken: %w", u.ID, u.Name, store.ErrConflict)
	case err != nil:
		return fmt.Errorf("creating user %s: %w", u.ID, err)
	}
	return nil
}

const userColumns = `id, name, team, role, created_at, disabled_at`

// Users lists the users of a team ("" for all), ordered by name.
func (s *Store) Users(ctx context.Context, team string) ([]core.User, error) {
	var (
		users []core.User
		err   error
	)
	if team == "" {
		users, err = queryRows(ctx, s.r, scanUser, `SELECT `+userColumns+` FROM users ORDER BY name`)
	} else {
		users, err = queryRows(ctx, s.r, scanUser, `SELECT `+userColumns+` FROM users WHERE team = ? ORDER BY name`, team)
	}
	if err != nil {
		return nil, fmt.Errorf("listing users of team %q: %w", team, err)
	}
	return users, nil
}

// User returns one user, or an error wrapping store.ErrNotFound.
func (s *Store) User(ctx context.Context, id string) (core.User, error) {
	u, err := scanUser(s.r.QueryRowContext(ctx, `SELECT `+userColumns+` FROM users WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return core.User{}, fmt.Errorf("user %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return core.User{}, fmt.Errorf("reading user %s: %w", id, err)
	}
	return u, nil
}

func scanUser(r rowScanner) (core.User, error) {
	var (
		u        core.User
		role     string
		created  int64
		disabled sql.NullInt64
	)
	if err := r.Scan(&u.ID, &u.Name, &u.Team, &role, &created, &disabled); err != nil {
		return core.User{}, err
	}
	u.Role, u.CreatedAt, u.DisabledAt = core.Role(role), fromUnix(created), fromOptional(disabled)
	return u, nil
}

// CreateToken stores a token; a duplicate id or hash is a conflict, an
// unknown user not found.
func (s *Store) CreateToken(ctx context.Context, t core.Token) error {
	_, err := s.w.ExecContext(ctx, `INSERT INTO tokens (id, user, hash, created_at, expires_at, revoked_at)
		VALUES (?, ?, ?, ?, ?, ?)`,
		t.ID, t.User, t.Hash, unixSeconds(t.CreatedAt), optionalTime(t.ExpiresAt), optionalTime(t.RevokedAt))
	switch {
	case isForeignKey(err):
		return fmt.Errorf("creating token %s: user %s does not exist: %w", t.ID, t.User, store.ErrNotFound)
	case isConstraint(err):
		return fmt.Errorf("creating token %s: its id or hash is taken: %w", t.ID, store.ErrConflict)
	case err != nil:
		return fmt.Errorf("creating token %s: %w", t.ID, err)
	}
	return nil
}

const tokenColumns = `id, user, hash, created_at, expires_at, revoked_at`

// TokenByHash returns the token with the given hash, or an error wrapping
// store.ErrNotFound.
func (s *Store) TokenByHash(ctx context.Context, hash string) (core.Token, error) {
	t, err := scanToken(s.r.QueryRowContext(ctx, `SELECT `+tokenColumns+` FROM tokens WHERE hash = ?`, hash))
	if errors.Is(err, sql.ErrNoRows) {
		// The hash is a credential's digest: it stays out of the message.
		return core.Token{}, fmt.Errorf("token with the given hash: %w", store.ErrNotFound)
	}
	if err != nil {
		return core.Token{}, fmt.Errorf("reading token by hash: %w", err)
	}
	return t, nil
}

// Token returns one token by id, or an error wrapping store.ErrNotFound.
func (s *Store) Token(ctx context.Context, id string) (core.Token, error) {
	t, err := scanToken(s.r.QueryRowContext(ctx, `SELECT `+tokenColumns+` FROM tokens WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return core.Token{}, fmt.Errorf("token %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return core.Token{}, fmt.Errorf("reading token %s: %w", id, err)
	}
	return t, nil
}

// Tokens lists the tokens of a user ("" for all), ordered by creation time
// then id.
func (s *Store) Tokens(ctx context.Context, user string) ([]core.Token, error) {
	var (
		tokens []core.Token
		err    error
	)
	if user == "" {
		tokens, err = queryRows(ctx, s.r, scanToken, `SELECT `+tokenColumns+` FROM tokens ORDER BY created_at, id`)
	} else {
		tokens, err = queryRows(ctx, s.r, scanToken,
			`SELECT `+tokenColumns+` FROM tokens WHERE user = ? ORDER BY created_at, id`, user)
	}
	if err != nil {
		return nil, fmt.Errorf("listing tokens of user %q: %w", user, err)
	}
	return tokens, nil
}

// RevokeToken marks a token revoked at at; a token already revoked keeps
// its first time.
func (s *Store) RevokeToken(ctx context.Context, id string, at time.Time) error {
	res, err := s.w.ExecContext(ctx, `UPDATE tokens SET revoked_at = coalesce(revoked_at, ?) WHERE id = ?`,
		unixSeconds(at), id)
	if err != nil {
		return fmt.Errorf("revoking token %s: %w", id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("revoking token %s: %w", id, err)
	}
	if n == 0 {
		return fmt.Errorf("revoking token %s: %w", id, store.ErrNotFound)
	}
	return nil
}

func scanToken(r rowScanner) (core.Token, error) {
	var (
		t                core.Token
		created          int64
		expires, revoked sql.NullInt64
	)
	if err := r.Scan(&t.ID, &t.User, &t.Hash, &created, &expires, &revoked); err != nil {
		return core.Token{}, err
	}
	t.CreatedAt = fromUnix(created)
	t.ExpiresAt, t.RevokedAt = fromOptional(expires), fromOptional(revoked)
	return t, nil
}

// PutQuota stores a team's quota for an instance type ("" for all types),
// replacing the one stored for that pair.
func (s *Store) PutQuota(ctx context.Context, q core.Quota) error {
	_, err := s.w.ExecContext(ctx, `INSERT INTO quotas (team, instance_type, max_instances_per_block,
			max_instances_held, max_duration_seconds, max_lead_seconds)
		VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (team, instance_type) DO UPDATE SET
			max_instances_per_block = excluded.max_instances_per_block,
			max_instances_held = excluded.max_instances_held,
			max_duration_seconds = excluded.max_duration_seconds,
			max_lead_seconds = excluded.max_lead_seconds`,
		q.Team, q.InstanceType, q.MaxInstancesPerBlock, q.MaxInstancesHeld,
		durationSeconds(q.MaxDuration), durationSeconds(q.MaxLead))
	if err != nil {
		return fmt.Errorf("storing quota of team %s for type %q: %w", q.Team, q.InstanceType, err)
	}
	return nil
}

// Quotas returns a team's quotas, the all-types row first, then by type.
func (s *Store) Quotas(ctx context.Context, team string) ([]core.Quota, error) {
	quotas, err := queryRows(ctx, s.r, scanQuota, `SELECT team, instance_type, max_instances_per_block,
			max_instances_held, max_duration_seconds, max_lead_seconds
		FROM quotas WHERE team = ? ORDER BY instance_type`, team)
	if err != nil {
		return nil, fmt.Errorf("reading quotas of team %s: %w", team, err)
	}
	return quotas, nil
}

func scanQuota(r rowScanner) (core.Quota, error) {
	var (
		q           core.Quota
		maxDuration int64
		maxLead     int64
	)
	if err := r.Scan(&q.Team, &q.InstanceType, &q.MaxInstancesPerBlock, &q.MaxInstancesHeld,
		&maxDuration, &maxLead); err != nil {
		return core.Quota{}, err
	}
	q.MaxDuration, q.MaxLead = time.Duration(maxDuration)*time.Second, time.Duration(maxLead)*time.Second
	return q, nil
}

// PutBudget stores a team's budget, replacing the previous one.
func (s *Store) PutBudget(ctx context.Context, b core.Budget) error {
	_, err := s.w.ExecContext(ctx, `INSERT INTO budgets (team, amount_minor, currency, period)
		VALUES (?, ?, ?, ?)
		ON CONFLICT (team) DO UPDATE SET amount_minor = excluded.amount_minor,
			currency = excluded.currency, period = excluded.period`,
		b.Team, b.Amount.Minor, b.Amount.Currency, b.Period)
	if err != nil {
		return fmt.Errorf("storing budget of team %s: %w", b.Team, err)
	}
	return nil
}

// Budget returns a team's budget, or an error wrapping store.ErrNotFound
// when none was set.
func (s *Store) Budget(ctx context.Context, team string) (core.Budget, error) {
	b := core.Budget{Team: team}
	err := s.r.QueryRowContext(ctx, `SELECT amount_minor, currency, period FROM budgets WHERE team = ?`, team).
		Scan(&b.Amount.Minor, &b.Amount.Currency, &b.Period)
	if errors.Is(err, sql.ErrNoRows) {
		return core.Budget{}, fmt.Errorf("budget of team %s: %w", team, store.ErrNotFound)
	}
	if err != nil {
		return core.Budget{}, fmt.Errorf("reading budget of team %s: %w", team, err)
	}
	return b, nil
}

// AppendAudit stores one audit record; its Seq is assigned by the table.
func (s *Store) AppendAudit(ctx context.Context, r core.AuditRecord) error {
	return insertAudit(ctx, s.w, r)
}

// execer is the writer's connection pool or a commit's transaction.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// insertAudit stores one audit record, alone or in a commit (Change.Audit).
func insertAudit(ctx context.Context, x execer, r core.AuditRecord) error {
	_, err := x.ExecContext(ctx, `INSERT INTO audit (time, user, team, token_id, method, route, subject, status, outcome)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		unixSeconds(r.Time), r.User, r.Team, r.TokenID, r.Method, r.Route, r.Subject, r.Status, r.Outcome)
	if err != nil {
		return fmt.Errorf("storing audit record of %s %s: %w", r.Method, r.Route, err)
	}
	return nil
}

// Audit returns up to limit records with Seq > after, ordered by Seq; a
// limit of zero or less means no limit, as for Events.
func (s *Store) Audit(ctx context.Context, after int64, limit int) ([]core.AuditRecord, error) {
	n := int64(limit)
	if limit <= 0 {
		n = math.MaxInt64
	}
	records, err := queryRows(ctx, s.r, scanAudit, `SELECT seq, time, user, team, token_id, method, route,
			subject, status, outcome
		FROM audit WHERE seq > ? ORDER BY seq LIMIT ?`, after, n)
	if err != nil {
		return nil, fmt.Errorf("reading audit records after %d: %w", after, err)
	}
	return records, nil
}

func scanAudit(r rowScanner) (core.AuditRecord, error) {
	var (
		a core.AuditRecord
		t int64
	)
	if err := r.Scan(&a.Seq, &t, &a.User, &a.Team, &a.TokenID, &a.Method, &a.Route,
		&a.Subject, &a.Status, &a.Outcome); err != nil {
		return core.AuditRecord{}, err
	}
	a.Time = fromUnix(t)
	return a, nil
}

// budgetSpendSQL is a team's own spending with time at or after ?2, as
// core.Posting.Spending counts it: what left its wallet (?1) less what
// came back, credits only when ?3. It reads through the
// postings_by_account index.
const budgetSpendSQL = `SELECT -coalesce(sum(amount_minor), 0)
	FROM postings WHERE account = ?1 AND time >= ?2 AND (kind <> 'credit' OR ?3)`

// checkBudget fails with core.ErrBudgetExceeded when the team's spending
// since g.Since, with the change's own journals, would
// exceed g.Limit. It runs inside the commit's BEGIN IMMEDIATE transaction,
// before anything is written, so concurrent commits see each other's
// spend.
func (w *commitTx) checkBudget(g core.BudgetGuard, journals []core.Journal) error {
	var spent int64
	if err := w.tx.QueryRowContext(w.ctx, budgetSpendSQL, core.WalletAccount(g.Team), unixSeconds(g.Since), boolInt(g.Credits)).Scan(&spent); err != nil {
		return fmt.Errorf("reading the spend of team %s: %w", g.Team, err)
	}
	return store.CheckBudget(g, spent, journals)
}

// querier is a *sql.DB or a *sql.Tx.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// queryRows runs a query and scans every row with scan.
func queryRows[T any](ctx context.Context, db querier, scan func(rowScanner) (T, error), query string, args ...any) ([]T, error) {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// optionalTime stores a zero time as NULL.
func optionalTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return unixSeconds(t)
}

func fromOptional(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return fromUnix(v.Int64)
}

// durationSeconds stores a duration as whole seconds.
func durationSeconds(d time.Duration) int64 { return int64(d / time.Second) }

// isForeignKey reports whether err is a violated FOREIGN KEY constraint:
// a row refers to a team or user that does not exist.
func isForeignKey(err error) bool {
	var e *sqlitedriver.Error
	return errors.As(err, &e) && e.Code() == sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY
}
