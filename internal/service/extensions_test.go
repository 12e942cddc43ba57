package service

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"capblock/internal/contract"
	"capblock/internal/core"
	"capblock/internal/store"
)

// TestExtendAgain: an extension offering bought again for the block it
// extended (a retry whose answer was lost) answers the same extension and
// charges nothing more, until long after the quote expired; for another
// team the block is not found, and on another block the offering is
// refused, as before.
func TestExtendAgain(t *testing.T) {
	ctx := t.Context()
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	svc, team := demoService(t, now, func(st store.Full) store.Full { return st })
	buy := func(token string) core.Block {
		t.Helper()
		offs, err := svc.Offerings(ctx, core.SearchRequest{Types: []string{"h100.8x"}, Count: 1, Duration: 4 * time.Hour,
			StartAfter: now.Add(2 * time.Hour), EndBefore: now.Add(12 * time.Hour)})
		if err != nil || len(offs) == 0 {
			t.Fatalf("searching: %v, %v", offs, err)
		}
		b, _, err := svc.Purchase(ctx, contract.PurchaseRequest{Team: team, OfferingID: offs[0].ID, ClientToken: token})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	b, other := buy("first"), buy("second")
	offs, err := svc.ExtensionOfferings(ctx, team, b.ID, 2*time.Hour)
	if err != nil || len(offs) == 0 {
		t.Fatalf("extension offerings: %v, %v", offs, err)
	}
	off := offs[0]
	first, err := svc.Extend(ctx, team, b.ID, off.ID)
	if err != nil {
		t.Fatal(err)
	}
	extended := b
	extended.End, extended.Fee.Minor, extended.Version = b.End.Add(2*time.Hour), b.Fee.Minor+off.Fee.Minor, b.Version+1
	want := contract.Extension{Block: extended, OfferingID: off.ID, Start: b.End, End: extended.End, Fee: off.Fee, PurchasedAt: now}
	if diff := cmp.Diff(want, first, cmp.FilterPath(func(p cmp.Path) bool { return p.String() == "Block.Placements" }, cmp.Ignore())); diff != "" {
		t.Fatalf("the extension (-want +got):\n%s", diff)
	}

	again := func(t *testing.T, scope string) {
		t.Helper()
		got, err := svc.Extend(ctx, scope, b.ID, off.ID)
		if err != nil {
			t.Errorf("the same offering again: %v", err)
		} else if diff := cmp.Diff(first, got); diff != "" {
			t.Errorf("the same offering again (-first +again):\n%s", diff)
		}
	}
	t.Run("again", func(t *testing.T) { again(t, team) })
	t.Run("again by an admin", func(t *testing.T) { again(t, "") })
	t.Run("again at once, several times", func(t *testing.T) {
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() { again(t, team) })
		}
		wg.Wait()
	})
	t.Run("bought at once by several calls", func(t *testing.T) {
		offs, err := svc.ExtensionOfferings(ctx, team, other.ID, time.Hour)
		if err != nil || len(offs) == 0 {
			t.Fatalf("extension offerings: %v, %v", offs, err)
		}
		got := make([]contract.Extension, 4)
		var wg sync.WaitGroup
		for i := range got {
			wg.Go(func() {
				var err error
				if got[i], err = svc.Extend(ctx, team, other.ID, offs[0].ID); err != nil {
					t.Errorf("call %d: %v", i, err)
				}
			})
		}
		wg.Wait()
		for i := range got[1:] {
			if diff := cmp.Diff(got[0], got[i+1]); diff != "" {
				t.Errorf("call %d (-call 0 +call %d):\n%s", i+1, i+1, diff)
			}
		}
		if !got[0].Block.End.Equal(other.End.Add(time.Hour)) {
			t.Errorf("block %s ends at %s, want one hour after %s", other.ID, got[0].Block.End, other.End)
		}
	})
	t.Run("another team", func(t *testing.T) {
		if _, err := svc.Extend(ctx, "team-b", b.ID, off.ID); !errors.Is(err, core.ErrNotFound) {
			t.Errorf("another team buying the offering: %v, want not found", err)
		}
	})
	t.Run("another block", func(t *testing.T) {
		if _, err := svc.Extend(ctx, team, other.ID, off.ID); !errors.Is(err, core.ErrOfferingInvalid) {
			t.Errorf("the offering on another block: %v, want offering invalid", err)
		}
	})
	t.Run("again once the quote expired", func(t *testing.T) {
		if _, err := svc.SimClock().Advance(time.Hour); err != nil {
			t.Fatal(err)
		}
		if svc.clock.Now().Before(off.ExpiresAt) {
			t.Fatalf("the quote expires at %s, after %s", off.ExpiresAt, svc.clock.Now())
		}
		again(t, team)
		if _, err := svc.Extend(ctx, "team-b", b.ID, off.ID); !errors.Is(err, core.ErrOfferingExpired) {
			t.Errorf("another team buying the expired offering: %v, want expired, as before", err)
		}
	})
	t.Run("charged once", func(t *testing.T) {
		ledger, err := svc.Ledger(ctx, "", team)
		if err != nil {
			t.Fatal(err)
		}
		charges := map[string][]core.Money{}
		for _, e := range ledger.Entries {
			if e.Kind != core.LedgerCharge {
				t.Errorf("ledger entry %+v, want only charges", e)
			}
			charges[e.Subject] = append(charges[e.Subject], e.Amount)
		}
		// Each block: its purchase and one extension.
		if n := len(charges[other.ID]); n != 2 {
			t.Errorf("block %s was charged %d times, want 2: %v", other.ID, n, charges[other.ID])
		}
		byAmount := cmpopts.SortSlices(func(x, y core.Money) bool { return x.Minor < y.Minor })
		if diff := cmp.Diff([]core.Money{b.Fee, off.Fee}, charges[b.ID], byAmount); diff != "" {
			t.Errorf("the charges for block %s (-want +got):\n%s", b.ID, diff)
		}
		if got, err := svc.GetBlock(ctx, team, b.ID); err != nil || !got.End.Equal(extended.End) || got.Fee != extended.Fee {
			t.Errorf("the block: %v, ends %s, fee %s; want the end and fee of one extension", err, got.End, got.Fee)
		}
	})
}
