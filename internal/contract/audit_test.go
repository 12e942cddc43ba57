package contract

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"capblock/internal/core"
)

func TestAuditIntent(t *testing.T) {
	now := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	success := core.AuditRecord{User: "usr-ada", Team: "ml", TokenID: "tok-ada", Method: "POST", Route: "/v1/blocks", Status: 201}
	tests := map[string]struct {
		success core.AuditRecord
		subject string
		want    core.AuditRecord
	}{
		"a purchase names the block it made": {
			success: success, subject: "cb-1",
			want: core.AuditRecord{Time: now, User: "usr-ada", Team: "ml", TokenID: "tok-ada", Method: "POST", Route: "/v1/blocks", Subject: "cb-1", Status: 201, Outcome: OutcomeOK},
		},
		"a request that names its subject keeps it": {
			success: core.AuditRecord{User: "usr-ada", Team: "ml", TokenID: "tok-ada", Method: "POST", Route: "/v1/blocks/{id}/cancel", Subject: "cb-2", Status: 200},
			subject: "cb-3",
			want:    core.AuditRecord{Time: now, User: "usr-ada", Team: "ml", TokenID: "tok-ada", Method: "POST", Route: "/v1/blocks/{id}/cancel", Subject: "cb-2", Status: 200, Outcome: OutcomeOK},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ctx := WithAudit(context.Background(), NewAuditIntent(tc.success))
			a := PendingAudit(ctx)
			if a == nil {
				t.Fatal("no pending audit in the context")
			}
			if diff := cmp.Diff(tc.want, a.Succeeded(now, tc.subject)); diff != "" {
				t.Errorf("record (-want +got):\n%s", diff)
			}
			if a.Stored() {
				t.Error("stored before MarkStored")
			}
			a.MarkStored()
			if !a.Stored() {
				t.Error("not stored after MarkStored")
			}
		})
	}
}

func TestPendingAuditWithoutIntent(t *testing.T) {
	if a := PendingAudit(context.Background()); a != nil {
		t.Errorf("PendingAudit = %+v, want nil", a)
	}
}
