package contract

import (
	"context"
	"sync/atomic"
	"time"

	"capblock/internal/core"
)

// OutcomeOK is the outcome of an audit record whose request succeeded.
// Any other outcome is the stable code of what went wrong (forbidden,
// not_found, no_capacity, …), which the front end that answered writes.
const OutcomeOK = "ok"

// AuditIntent is the audit record of a mutating request in progress.
//
// The front end opens it with what it knows of the request in its own
// terms: who, with which token, the method, route and subject, and the
// status it answers when the request succeeds. The service then only
// says whether, when and about what it succeeded (Succeeded): it may
// store the record with the change that the request commits, so that the
// change is never durable without its record, and marks it stored
// (MarkStored). Otherwise the front end stores the record once its
// answer is known, failures included.
type AuditIntent struct {
	rec    core.AuditRecord
	stored atomic.Bool
}

// NewAuditIntent opens the audit intent of a request that the front end
// describes in success: the record as it reads when the request
// succeeds, but for its time, outcome and, when the request names
// none, its subject.
func NewAuditIntent(success core.AuditRecord) *AuditIntent {
	return &AuditIntent{rec: success}
}

type auditKey struct{}

// WithAudit returns ctx carrying a, for the service to find with
// PendingAudit.
func WithAudit(ctx context.Context, a *AuditIntent) context.Context {
	return context.WithValue(ctx, auditKey{}, a)
}

// PendingAudit returns the audit intent of the request of ctx, or nil.
func PendingAudit(ctx context.Context) *AuditIntent {
	a, _ := ctx.Value(auditKey{}).(*AuditIntent)
	return a
}

// Succeeded returns the record of the request succeeding at now; subject
// names what it made, when the request names nothing (a purchase's new
// block).
func (a *AuditIntent) Succeeded(now time.Time, subject string) core.AuditRecord {
	r := a.rec
	r.Time, r.Outcome = now, OutcomeOK
	if r.Subject == "" {
		r.Subject = subject
	}
	return r
}

// MarkStored says that a committed change holds the record.
func (a *AuditIntent) MarkStored() { a.stored.Store(true) }

// Stored reports whether a committed change holds the record, which the
// front end then does not store again.
func (a *AuditIntent) Stored() bool { return a.stored.Load() }
