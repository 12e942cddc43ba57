package postgres

import (
	"github.com/jackc/pgx/v5"

	"capblock/internal/core"
	"capblock/internal/store"
)

// budgetSpendSQL is a team's own spending with time at or after $2, as
// core.Posting.Spending counts it: what left its wallet ($1) less what
// came back, credits only when $3. It reads through the
// postings_by_account index.
const budgetSpendSQL = `SELECT -coalesce(sum(amount_minor), 0)::bigint
	FROM postings WHERE account = $1 AND time >= $2 AND (kind <> 'credit' OR $3)`

// queueBudget queues the budget guard, first in the commit as in the
// sqlite driver: it locks the team, so that guarded commits of one team
// run their check and their writes one at a time, and then sums the
// team's spend, in a statement of its own whose snapshot sees every
// guarded commit that held the lock before. Unguarded commits take no
// lock: they read no spend, so running them in any order gives a result
// that one order of whole commits gives too.
func (w *commitWriter) queueBudget(g core.BudgetGuard, journals []core.Journal) {
	w.exec("locking the budget of team "+g.Team, nil,
		`SELECT pg_advisory_xact_lock($1, $2)`, teamLockClass, lockKey(g.Team))
	w.batch.Queue(budgetSpendSQL, core.WalletAccount(g.Team), seconds(g.Since), g.Credits).QueryRow(step(func(row pgx.Row) error {
		var spent int64
		if err := row.Scan(&spent); err != nil {
			return dbError("reading the spend of team "+g.Team, err)
		}
		return store.CheckBudget(g, spent, journals)
	}))
}
