package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"capblock/internal/core"
	"capblock/internal/store"
)

// The accounts (store.Accounts) live in the tables of 0002_accounts. Each
// write is one autocommit statement. Times are whole seconds, as
// everywhere in this driver; an unset optional time is NULL.

var _ store.Full = (*Store)(nil)

// codeForeignKeyViolation is a row that refers to a team or user that does
// not exist.
const codeForeignKeyViolation = "23503"

// createError maps the failure of a CREATE method: a unique violation is a
// conflict, a foreign key violation a missing parent.
func createError(what, taken, missing string, err error) error {
	switch {
	case err == nil:
		return nil
	case sqlState(err) == codeUniqueViolation:
		return fmt.Errorf("%s: %s: %w", what, taken, store.ErrConflict)
	case sqlState(err) == codeForeignKeyViolation:
		return fmt.Errorf("%s: %s: %w", what, missing, store.ErrNotFound)
	}
	return dbError(what, err)
}

// CreateTeam stores a new team; a duplicate id or name is a conflict.
func (s *Store) CreateTeam(ctx context.Context, t core.Team) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO teams (id, name, created_at) VALUES ($1, $2, $3)`,
		t.ID, t.Name, seconds(t.CreatedAt))
	return createError("creating team "+t.ID, fmt.Sprintf("its id or name %q is taken", t.Name), "", err)
}

// Teams lists every team, ordered by name.
func (s *Store) Teams(ctx context.Context) ([]core.Team, error) {
	teams, err := queryRows(ctx, s.pool, scanTeam, `SELECT `+teamColumns+` FROM teams ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("listing teams: %w", err)
	}
	return teams, nil
}

// Team returns one team, or an error wrapping store.ErrNotFound.
func (s *Store) Team(ctx context.Context, id string) (core.Team, error) {
	t, err := scanTeam(s.pool.QueryRow(ctx, `SELECT `+teamColumns+` FROM teams WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
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
		disabled *time.Time
	)
	if err := r.Scan(&t.ID, &t.Name, &t.CreatedAt, &disabled); err != nil {
		return core.Team{}, err
	}
	t.CreatedAt, t.DisabledAt = t.CreatedAt.UTC(), fromOptional(disabled)
	return t, nil
}

// SetTeamDisabled disables a team at at, or enables it when at is zero;
// the other replicas hear of it.
func (s *Store) SetTeamDisabled(ctx context.Context, id string, at time.Time) error {
	return s.setDisabled(ctx, "teams", "team", id, at)
}

// SetUserDisabled disables a user at at, or enables it when at is zero;
// the other replicas hear of it.
func (s *Store) SetUserDisabled(ctx context.Context, id string, at time.Time) error {
	return s.setDisabled(ctx, "users", "user", id, at)
}

// setDisabled sets disabled_at of row id of table (teams or users),
// keeping an earlier time when it is already disabled.
func (s *Store) setDisabled(ctx context.Context, table, kind, id string, at time.Time) error {
	tag, err := s.execAccounts(ctx, `UPDATE `+table+` SET disabled_at = CASE WHEN $1::timestamptz IS NULL THEN NULL ELSE coalesce(disabled_at, $1) END WHERE id = $2`,
		optionalTime(at), id)
	if err != nil {
		return dbError("setting "+kind+" "+id+" disabled", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%s %s: %w", kind, id, store.ErrNotFound)
	}
	return nil
}

// CreateUser stores a new user; a duplicate id or name is a conflict, an
// unknown team not found.
func (s *Store) CreateUser(ctx context.Context, u core.User) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO users (id, name, team, role, created_at) VALUES ($1, $2, $3, $4, $5)`,
		u.ID, u.Name, u.Team, string(u.Role), seconds(u.CreatedAt))
	return createError("creating user "+u.ID, fmt.Sprintf("its id or name %q is taken", u.Name),
		fmt.Sprintf("team %s does not exist", u.Team), err)
}

const userColumns = `id, name, team, role, created_at, disabled_at`

// Users lists the users of a team ("" for all), ordered by name.
func (s *Store) Users(ctx context.Context, team string) ([]core.User, error) {
	var (
		users []core.User
		err   error
	)
	if team == "" {
		users, err = queryRows(ctx, s.pool, scanUser, `SELECT `+userColumns+` FROM users ORDER BY name`)
	} else {
		users, err = queryRows(ctx, s.pool, scanUser, `SELECT `+userColumns+` FROM users WHERE team = $1 ORDER BY name`, team)
	}
	if err != nil {
		return nil, fmt.Errorf("listing users of team %q: %w", team, err)
	}
	return users, nil
}

// User returns one user, or an error wrapping store.ErrNotFound.
func (s *Store) User(ctx context.Context, id string) (core.User, error) {
	u, err := scanUser(s.pool.QueryRow(ctx, `SELECT `+userColumns+` FROM users WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
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
		disabled *time.Time
	)
	if err := r.Scan(&u.ID, &u.Name, &u.Team, &role, &u.CreatedAt, &disabled); err != nil {
		return core.User{}, err
	}
	u.Role, u.CreatedAt, u.DisabledAt = core.Role(role), u.CreatedAt.UTC(), fromOptional(disabled)
	return u, nil
}

// CreateToken stores a token; a duplicate id or hash is a conflict, an
// unknown user not found.
func (s *Store) CreateToken(ctx context.Context, t core.Token) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO tokens (id, user_id, hash, created_at, expires_at, revoked_at)
		VALUES ($1, $2, $3, $4, $5, $6)`,
		t.ID, t.User, t.Hash, seconds(t.CreatedAt), optionalTime(t.ExpiresAt), optionalTime(t.RevokedAt))
	return createError("creating token "+t.ID, "its id or hash is taken",
		fmt.Sprintf("user %s does not exist", t.User), err)
}

const tokenColumns = `id, user_id, hash, created_at, expires_at, revoked_at`

// TokenByHash returns the token with the given hash, or an error wrapping
// store.ErrNotFound.
func (s *Store) TokenByHash(ctx context.Context, hash string) (core.Token, error) {
	t, err := scanToken(s.pool.QueryRow(ctx, `SELECT `+tokenColumns+` FROM tokens WHERE hash = $1`, hash))
	if errors.Is(err, pgx.ErrNoRows) {
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
	t, err := scanToken(s.pool.QueryRow(ctx, `SELECT `+tokenColumns+` FROM tokens WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
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
		tokens, err = queryRows(ctx, s.pool, scanToken, `SELECT `+tokenColumns+` FROM tokens ORDER BY created_at, id`)
	} else {
		tokens, err = queryRows(ctx, s.pool, scanToken,
			`SELECT `+tokenColumns+` FROM tokens WHERE user_id = $1 ORDER BY created_at, id`, user)
	}
	if err != nil {
		return nil, fmt.Errorf("listing tokens of user %q: %w", user, err)
	}
	return tokens, nil
}

// RevokeToken marks a token revoked at at; a token already revoked keeps
// its first time.
func (s *Store) RevokeToken(ctx context.Context, id string, at time.Time) error {
	tag, err := s.execAccounts(ctx, `UPDATE tokens SET revoked_at = coalesce(revoked_at, $1) WHERE id = $2`,
		seconds(at), id)
	if err != nil {
		return dbError("revoking token "+id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("revoking token %s: %w", id, store.ErrNotFound)
	}
	return nil
}

func scanToken(r rowScanner) (core.Token, error) {
	var (
		t                core.Token
		expires, revoked *time.Time
	)
	if err := r.Scan(&t.ID, &t.User, &t.Hash, &t.CreatedAt, &expires, &revoked); err != nil {
		return core.Token{}, err
	}
	t.CreatedAt = t.CreatedAt.UTC()
	t.ExpiresAt, t.RevokedAt = fromOptional(expires), fromOptional(revoked)
	return t, nil
}

// PutQuota stores a team's quota for an instance type ("" for all types),
// replacing the one stored for that pair.
func (s *Store) PutQuota(ctx context.Context, q core.Quota) error {
	_, err := s.execAccounts(ctx, `INSERT INTO quotas (team, instance_type, max_instances_per_block,
			max_instances_held, max_duration_seconds, max_lead_seconds)
		VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (team, instance_type) DO UPDATE SET
			max_instances_per_block = excluded.max_instances_per_block,
			max_instances_held = excluded.max_instances_held,
			max_duration_seconds = excluded.max_duration_seconds,
			max_lead_seconds = excluded.max_lead_seconds`,
		q.Team, q.InstanceType, q.MaxInstancesPerBlock, q.MaxInstancesHeld,
		durationSeconds(q.MaxDuration), durationSeconds(q.MaxLead))
	if err != nil {
		return dbError(fmt.Sprintf("storing quota of team %s for type %q", q.Team, q.InstanceType), err)
	}
	return nil
}

// Quotas returns a team's quotas, the all-types row first, then by type.
func (s *Store) Quotas(ctx context.Context, team string) ([]core.Quota, error) {
	quotas, err := queryRows(ctx, s.pool, scanQuota, `SELECT team, instance_type, max_instances_per_block,
			max_instances_held, max_duration_seconds, max_lead_seconds
		FROM quotas WHERE team = $1 ORDER BY instance_type`, team)
	if err != nil {
		return nil, fmt.Errorf("reading quotas of team %s: %w", team, err)
	}
	return quotas, nil
}

func scanQuota(r rowScanner) (core.Quota, error) {
	var (
		q                    core.Quota
		maxDuration, maxLead int64
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
	_, err := s.execAccounts(ctx, `INSERT INTO budgets (team, amount_minor, currency, period)
		VALUES ($1, $2, $3, $4)
		ON CONFLICT (team) DO UPDATE SET amount_minor = excluded.amount_minor,
			currency = excluded.currency, period = excluded.period`,
		b.Team, b.Amount.Minor, b.Amount.Currency, b.Period)
	if err != nil {
		return dbError("storing budget of team "+b.Team, err)
	}
	return nil
}

// Budget returns a team's budget, or an error wrapping store.ErrNotFound
// when none was set.
func (s *Store) Budget(ctx context.Context, team string) (core.Budget, error) {
	b := core.Budget{Team: team}
	err := s.pool.QueryRow(ctx, `SELECT amount_minor, currency, period FROM budgets WHERE team = $1`, team).
		Scan(&b.Amount.Minor, &b.Amount.Currency, &b.Period)
	if errors.Is(err, pgx.ErrNoRows) {
		return core.Budget{}, fmt.Errorf("budget of team %s: %w", team, store.ErrNotFound)
	}
	if err != nil {
		return core.Budget{}, fmt.Errorf("reading budget of team %s: %w", team, err)
	}
	return b, nil
}

// AppendAudit stores one audit record; its Seq is assigned by the table.
// Like a commit's events, it takes its seq under the audit lock shared, so
// that Audit never returns a seq before a smaller one still in flight.
func (s *Store) AppendAudit(ctx context.Context, r core.AuditRecord) error {
	b := &pgx.Batch{}
	queueAudit(b, []core.AuditRecord{r})
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return dbError(fmt.Sprintf("storing audit record of %s %s", r.Method, r.Route), err)
	}
	return nil
}

// queueAudit queues the audit lock, taken shared, and the records'
// inserts, alone or in a commit (Change.Audit).
func queueAudit(b *pgx.Batch, rs []core.AuditRecord) {
	if len(rs) == 0 {
		return
	}
	b.Queue(`SELECT pg_advisory_xact_lock_shared($1, 0)`, auditLockClass)
	for _, r := range rs {
		b.Queue(`INSERT INTO audit (time, user_id, team, token_id, method, route, subject, status, outcome)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
			seconds(r.Time), r.User, r.Team, r.TokenID, r.Method, r.Route, r.Subject, r.Status, r.Outcome).
			Exec(func(pgconn.CommandTag) error { return nil })
	}
}

// Audit returns up to limit records with Seq > after, ordered by Seq; a
// limit of zero or less means no limit, as for Events, which explains the
// lock.
func (s *Store) Audit(ctx context.Context, after int64, limit int) ([]core.AuditRecord, error) {
	n := int64(limit)
	if limit <= 0 {
		n = math.MaxInt64
	}
	var records []core.AuditRecord
	b := &pgx.Batch{}
	b.Queue(`SELECT pg_advisory_xact_lock($1, 0)`, auditLockClass)
	b.Queue(`SELECT seq, time, user_id, team, token_id, method, route, subject, status, outcome
		FROM audit WHERE seq > $1 ORDER BY seq LIMIT $2`, after, n).Query(func(rows pgx.Rows) error {
		var err error
		records, err = collect(rows, scanAudit)
		return err
	})
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("reading audit records after %d: %w", after, err)
	}
	return records, nil
}

func scanAudit(r rowScanner) (core.AuditRecord, error) {
	var a core.AuditRecord
	if err := r.Scan(&a.Seq, &a.Time, &a.User, &a.Team, &a.TokenID, &a.Method, &a.Route,
		&a.Subject, &a.Status, &a.Outcome); err != nil {
		return core.AuditRecord{}, err
	}
	a.Time = a.Time.UTC()
	return a, nil
}

// queryRows runs a query and scans every row with scan.
func queryRows[T any](ctx context.Context, q querier, scan func(rowScanner) (T, error), query string, args ...any) ([]T, error) {
	rows, err := q.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return collect(rows, scan)
}

// collect scans every row with scan and closes rows.
func collect[T any](rows pgx.Rows, scan func(rowScanner) (T, error)) ([]T, error) {
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
	return seconds(t)
}

func fromOptional(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

// durationSeconds stores a duration as whole seconds.
func durationSeconds(d time.Duration) int64 { return int64(d / time.Second) }
