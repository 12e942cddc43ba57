package e2e

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	mathrand "math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"capblock/internal/core"
	"capblock/internal/seal"
	"capblock/internal/service"
	"capblock/internal/store"
	"capblock/internal/store/sqlite"
)

// bigFleetYAML is a fleet of 10,000 nodes: 4 zones × 50 racks × 50 nodes
// of 8 H100, selling h100.8x (a whole node).
func bigFleetYAML() string {
	var b strings.Builder
	b.WriteString("currency: USD\ninstanceTypes:\n")
	b.WriteString("  - {name: h100.8x, gpuModel: H100, gpusPerInstance: 8, onDemandPrice: \"98.32\"}\n")
	b.WriteString("zones:\n")
	for z := 1; z <= 4; z++ {
		fmt.Fprintf(&b, "  - name: zone-%d\n    racks:\n", z)
		for r := 1; r <= 50; r++ {
			fmt.Fprintf(&b, "      - name: z%d-r%02d\n        nodeGroups:\n", z, r)
			fmt.Fprintf(&b, "          - {prefix: z%d-r%02d-, count: 50, gpuModel: H100, gpus: 8}\n", z, r)
		}
	}
	return b.String()
}

// buyer is who seeded purchases are made by: the admin user and its team.
type buyer struct{ user, team string }

// seedPurchases writes n purchases of one instance of typ for 1 to
// maxHours hours at random starts over 8 weeks from t0 straight into the
// SQLite file db, whose server must be stopped: the rows a purchase
// through the API writes (the block and its allocations, the used quote,
// the idempotency record, the charge, the purchased and scheduled events
// and the audit record), in transactions of a few thousand purchases. The
// blocks are placed by the core's index, as the server places them; the
// fee is priced as if the pool were empty (the booked share changes the
// amount, not the rows). The server loads them at its next start like
// any other live blocks.
func seedPurchases(tb testing.TB, db string, f core.Fleet, by buyer, typ string, maxHours, n int, seed uint64) {
	tb.Helper()
	ctx := context.Background()
	t, ok := f.Type(typ)
	if !ok {
		tb.Fatalf("seeding: the fleet sells no %s", typ)
	}
	st, err := sqlite.Open(ctx, db)
	if err != nil {
		tb.Fatalf("seeding: opening %s: %v", db, err)
	}
	defer st.Close()
	// The server that made the database left its secrets key beside it.
	key, err := seal.Load(filepath.Join(filepath.Dir(db), "secrets.key"))
	if err != nil {
		tb.Fatalf("seeding: %v", err)
	}
	secret, err := service.SigningSecret(ctx, st, key, nil)
	if err != nil {
		tb.Fatalf("seeding: %v", err)
	}
	// 1. Place every block on one index, in purchase order; a block that
	//    a later placement moves keeps its last placement.
	ix, err := core.NewIndex(&f, nil, t0)
	if err != nil {
		tb.Fatalf("seeding: %v", err)
	}
	zones := f.Zones(t.GPUModel)
	rng := mathrand.New(mathrand.NewPCG(seed, 11))
	blocks := make([]core.Block, 0, n)
	at := make(map[string]int, n)
	for len(blocks) < n {
		hours := 1 + rng.IntN(maxHours)
		start := t0.Add(time.Duration(1+rng.IntN(8*7*24-hours)) * time.Hour)
		end := start.Add(time.Duration(hours) * time.Hour)
		first := rng.IntN(len(zones))
		for i := range zones {
			zone := zones[(first+i)%len(zones)]
			plan, err := ix.Place(core.PlaceRequest{Type: t, Count: 1, Zone: zone, Start: start, End: end}, t0)
			if errors.Is(err, core.ErrNoCapacity) {
				continue
			}
			if err != nil {
				tb.Fatalf("seeding: placing block %d: %v", len(blocks), err)
			}
			for _, m := range plan.Moves {
				blocks[at[m.ID]].Placements = m.Placements
				if err := ix.Add(m); err != nil {
					tb.Fatalf("seeding: moving block %s: %v", m.ID, err)
				}
			}
			b := core.Block{ID: seedID("cb"), Team: by.team, InstanceType: t.Name, GPUModel: t.GPUModel, Count: 1,
				Zone: zone, Start: start, End: end, State: core.StateScheduled,
				Fee: f.Pricing.Fee(t.OnDemand, f.Pricing.Factor(0, int64(start.Sub(t0)/time.Hour),
					int64(f.Limits.MaxLeadTime/time.Hour)), hours, 1),
				CreatedAt: t0, Placements: plan.Placements, Version: 1}
			if err := ix.Add(b); err != nil {
				tb.Fatalf("seeding: indexing block %s: %v", b.ID, err)
			}
			at[b.ID] = len(blocks)
			blocks = append(blocks, b)
			break
		}
	}
	// 2. Write them, a few thousand purchases per transaction.
	const perCommit = 5000
	for from := 0; from < len(blocks); from += perCommit {
		var c store.Change
		for i, b := range blocks[from:min(from+perCommit, len(blocks))] {
			o := core.Offering{Kind: core.KindBlock, InstanceType: b.InstanceType, Count: 1, Zone: b.Zone,
				Start: b.Start, End: b.End, Fee: b.Fee, OnDemandFee: core.OnDemandFee(t.OnDemand, b.DurationHours(), 1),
				ExpiresAt: t0.Add(f.Limits.OfferingTTL)}
			o.Sign(secret)
			hash := sha256.Sum256(fmt.Appendf(nil, "%q\n%q\n", o.ID, ""))
			c.Insert = append(c.Insert, b)
			c.Offerings = append(c.Offerings, o.ID)
			c.Idempotency = append(c.Idempotency, store.IdempotencyRecord{Team: by.team,
				ClientToken: fmt.Sprintf("seed-%d-%d", seed, from+i), RequestHash: hex.EncodeToString(hash[:]),
				Subject: b.ID, CreatedAt: t0})
			c.Journals = append(c.Journals, core.Payment(seedID("jr"), core.JournalPurchase, t0, by.team, b.ID, t.Name,
				b.Fee, o.OnDemandFee, core.EscrowAccount(b.ID)))
			c.Events = append(c.Events,
				core.Event{ID: seedID("evt"), Time: t0, Type: core.EventBlockPurchased, Subject: b.ID, Team: by.team,
					Data: map[string]any{"offeringId": o.ID, "upfrontFee": b.Fee.String(), "currency": b.Fee.Currency}},
				core.Event{ID: seedID("evt"), Time: t0, Type: core.EventBlockScheduled, Subject: b.ID, Team: by.team,
					Data: map[string]any{"from": string(core.StatePaymentPending), "to": string(core.StateScheduled)}})
			c.Audit = append(c.Audit, core.AuditRecord{Time: t0, User: by.user, Team: by.team, Method: "POST",
				Route: "/v1/blocks", Subject: b.ID, Status: 201, Outcome: "ok"})
		}
		if err := st.Commit(ctx, c); err != nil {
			tb.Fatalf("seeding: committing purchases %d to %d: %v", from, from+len(c.Insert), err)
		}
	}
}

// seedID is an id in the service's format: prefix, a dash, 17 random hex
// digits.
func seedID(prefix string) string {
	var b [9]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])[:17]
}
