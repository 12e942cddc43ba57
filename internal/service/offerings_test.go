package service

import (
	"errors"
	"testing"
	"time"

	"capblock/internal/contract"
	"capblock/internal/core"
	"capblock/internal/store"
)

// TestOfferingsRespectTheTeamsQuota: a team limited to 8 instances per
// block and 72 hours is refused a search for 10 instances or 96 hours,
// with the limit, as its purchase would be; within its quota it is
// offered no alternative longer than 72 hours. A search for no team is
// bounded by the operator's limits alone.
func TestOfferingsRespectTheTeamsQuota(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	svc, team := demoService(t, now, func(st store.Full) store.Full { return st })
	if _, err := svc.PutQuota(t.Context(), core.Quota{Team: team, MaxInstancesPerBlock: 8, MaxDuration: 72 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	search := func(team string, count, hours int) ([]core.Offering, error) {
		return svc.Offerings(t.Context(), core.SearchRequest{Types: []string{"h100.8x"}, Count: count,
			Duration: time.Duration(hours) * time.Hour, StartAfter: now, EndBefore: now.Add(14 * 24 * time.Hour), Team: team})
	}
	for name, tc := range map[string]struct {
		count, hours int
		want         string
	}{
		"too many instances": {count: 10, hours: 48, want: "quota exceeded: 10 instances in one block, above the team's limit of 8 per block"},
		"too long":           {count: 8, hours: 96, want: "quota exceeded: a block of 96h, above the team's longest of 72h"},
	} {
		t.Run(name, func(t *testing.T) {
			offs, err := search(team, tc.count, tc.hours)
			if !errors.Is(err, core.ErrQuotaExceeded) || err.Error() != tc.want {
				t.Fatalf("got %d offerings, error %v; want %q", len(offs), err, tc.want)
			}
			if offs, err := search("", tc.count, tc.hours); err != nil || len(offs) == 0 {
				t.Errorf("without a team: %d offerings, error %v", len(offs), err)
			}
		})
	}
	t.Run("no alternative beyond the longest block", func(t *testing.T) {
		offs, err := search(team, 8, 72)
		if err != nil || len(offs) == 0 {
			t.Fatalf("%d offerings, error %v", len(offs), err)
		}
		shorter := false
		for _, o := range offs {
			if o.DurationHours() > 72 {
				t.Errorf("offered %d hours, above the team's 72", o.DurationHours())
			}
			shorter = shorter || o.Alternative
		}
		if !shorter {
			t.Error("no shorter alternative offered")
		}
	})
}

// TestPlanOfferingsRespectTheTeamsQuota: a team limited to 8 instances
// per block and blocks of 24 hours is refused a plan of 10 instances, and
// one of 48 hours on an empty fleet (one segment of 48 hours is all that
// fits there), with the limit, as its purchase would be; a search for no
// team is offered it; a plan of 24 hours is offered and can be bought.
func TestPlanOfferingsRespectTheTeamsQuota(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	svc, team := demoService(t, now, func(st store.Full) store.Full { return st })
	if _, err := svc.PutQuota(t.Context(), core.Quota{Team: team, MaxInstancesPerBlock: 8, MaxDuration: 24 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	search := func(team string, count, hours int) ([]core.PlanOffering, error) {
		return svc.PlanOfferings(t.Context(), core.PlanSearchRequest{Type: "h100.8x", Count: count, Duration: time.Duration(hours) * time.Hour,
			StartAfter: now, EndBefore: now.Add(14 * 24 * time.Hour), MaxSegments: 2, Team: team})
	}
	for name, tc := range map[string]struct {
		count, hours int
		want         string
	}{
		"too many instances": {count: 10, hours: 24, want: "quota exceeded: 10 instances in one block, above the team's limit of 8 per block"},
		"too long":           {count: 2, hours: 48, want: "segment 1 of the plan: quota exceeded: a block of 48h, above the team's longest of 24h"},
	} {
		t.Run(name, func(t *testing.T) {
			offs, err := search(team, tc.count, tc.hours)
			if !errors.Is(err, core.ErrQuotaExceeded) || err.Error() != tc.want {
				t.Fatalf("got %d offerings, error %v; want %q", len(offs), err, tc.want)
			}
			if offs, err := search("", tc.count, tc.hours); err != nil || len(offs) == 0 {
				t.Errorf("without a team: %d offerings, error %v", len(offs), err)
			}
		})
	}
	offs, err := search(team, 2, 24)
	if err != nil || len(offs) == 0 {
		t.Fatalf("within the quota: %d offerings, error %v", len(offs), err)
	}
	if _, _, err := svc.PurchasePlan(t.Context(), contract.PlanPurchaseRequest{Team: team, OfferingID: offs[0].ID, ClientToken: "within"}); err != nil {
		t.Fatalf("buying the first offering: %v", err)
	}
}
