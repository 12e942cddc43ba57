package postgres

import (
	"github.com/jackc/pgx/v5"

	"capblock/internal/core"
	"capblock/internal/store"
)

// budgetSpendSQL is a team's net spend with time at or after $2: charges
// count positive, refunds negative whatever the sign they were stored
// with. It reads through the ledger_by_team index.
const budgetSpendSQL = `SELECT coalesce(sum(CASE WHEN kind = 'refund' THEN -abs(amount_minor) ELSE amount_minor END), 0)::bigint
	FROM ledger WHERE team = $1 AND time >= $2`

// queueBudget queues the budget guard, first in the commit as in the
// sqlite driver: it locks the team, so that guarded commits of one team
// run their check and their writes one at a time, and then sums the
// team's spend, in a statement of its own whose snapshot sees every
// guarded commit that held the lock before. Unguarded commits take no
// lock: they read no spend, so running them in any order gives a result
// that one order of whole commits gives too.
func (w *commitWriter) queueBudget(g core.BudgetGuard, entries []core.LedgerEntry) {
	w.exec("locking the budget of team "+g.Team, nil,
		`SELECT pg_advisory_xact_lock($1, $2)`, teamLockClass, lockKey(g.Team))
	w.batch.Queue(budgetSpendSQL, g.Team, seconds(g.Since)).QueryRow(step(func(row pgx.Row) error {
		var spent int64
		if err := row.Scan(&spent); err != nil {
			return dbError("reading the spend of team "+g.Team, err)
		}
		return store.CheckBudget(g, spent, entries)
	}))
}
