package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"capblock/internal/core"
	"capblock/internal/store"
)

// CommitGroupFunc commits batch as one group of a driver's group commit
// and sets each request's answer.
type CommitGroupFunc func(batch []*store.CommitRequest)

// GroupFailsAlone: in one group, each change that fails its re-check
// fails alone, and the others commit, each whole, the failed ones leaving
// nothing. The group holds a block that overlaps one committed before it
// in the group, a client token used before it in the group, a change
// whose caller gave up, an offering used before it in the group, and an
// update of a stored block that fails after it was applied (its client
// token is taken), followed by the same update in a change that holds: it
// must find the block as it was stored, not as the failed change left it.
func GroupFailsAlone(t *testing.T, s store.Full, commitGroup CommitGroupFunc) {
	ctx := t.Context()
	stored := PurchaseChange(10)
	mustDo(t, "committing the block to update", s.Commit(ctx, stored))
	rename := func(token string) store.Change {
		b := stored.Insert[0]
		b.Name = "renamed-" + token
		return store.Change{
			Update:      []store.BlockUpdate{{Block: b, ExpectedVersion: 1}},
			Idempotency: []store.IdempotencyRecord{{Team: b.Team, ClientToken: token, RequestHash: "sha256:" + token, Subject: b.ID, CreatedAt: b.CreatedAt}},
		}
	}

	first := PurchaseChange(0)
	overlapping := twin(first, "cb-overlap")
	sameToken := PurchaseChange(2)
	sameToken.Idempotency[0].ClientToken = PurchaseChange(1).Idempotency[0].ClientToken
	sameToken.Idempotency[0].Team = PurchaseChange(1).Idempotency[0].Team
	usedOffering := PurchaseChange(5)
	usedOffering.Offerings = first.Offerings // signed anew at each call
	gone, cancel := context.WithCancel(ctx)
	cancel()
	tokenTaken := rename(stored.Idempotency[0].ClientToken) // the purchase's token
	tokenTaken.Idempotency[0].Team = stored.Idempotency[0].Team

	changes := []store.Change{
		first, overlapping, PurchaseChange(1), sameToken, PurchaseChange(3),
		usedOffering, tokenTaken, rename("tok-rename"), PurchaseChange(4),
	}
	ctxs := make([]context.Context, len(changes))
	for i := range ctxs {
		ctxs[i] = ctx
	}
	ctxs[4] = gone
	batch := make([]*store.CommitRequest, len(changes))
	for i, c := range changes {
		r, err := store.NewCommitRequest(ctxs[i], c)
		mustDo(t, "making a commit request", err)
		batch[i] = r
	}
	commitGroup(batch)
	errs := make([]error, len(batch))
	for i, r := range batch {
		errs[i] = r.Err
	}
	for i, want := range []string{"", "conflict", "", "conflict", "canceled", "used", "conflict", "", ""} {
		err := errs[i]
		switch {
		case want == "" && err != nil:
			t.Errorf("change %d of the group: %v; want it committed", i, err)
		case want == "conflict" && !store.IsConflict(err):
			t.Errorf("change %d of the group: %v; want a conflict", i, err)
		case want == "used" && !errors.Is(err, core.ErrOfferingUsed):
			t.Errorf("change %d of the group: %v; want its offering used", i, err)
		case want == "canceled" && !errors.Is(err, context.Canceled):
			t.Errorf("change %d of the group: %v; want its caller's cancellation", i, err)
		}
	}
	blocks, err := s.ListBlocks(ctx, store.BlockFilter{})
	mustDo(t, "listing blocks", err)
	var ids []string
	for _, b := range blocks {
		ids = append(ids, b.ID)
	}
	if got, want := strings.Join(ids, " "), "cb-00000000 cb-00000001 cb-00000004 cb-00000010"; got != want {
		t.Errorf("blocks stored: %s; want %s", got, want)
	}
	b, err := s.GetBlock(ctx, stored.Insert[0].ID)
	mustDo(t, "reading the updated block", err)
	if b.Name != "renamed-tok-rename" || b.Version != 2 {
		t.Errorf("the updated block: name %q, version %d; want the name of the change that held, version 2", b.Name, b.Version)
	}
	events, err := s.Events(ctx, "", 0, 0)
	mustDo(t, "reading events", err)
	if len(events) != 8 {
		t.Errorf("%d events stored, want the 8 of the four committed purchases", len(events))
	}
	if pending, _, err := s.ActionCounts(ctx); err != nil || pending != 4 {
		t.Errorf("ActionCounts: %d pending, %v; want the 4 of the committed purchases", pending, err)
	}
	if _, err := s.Idempotency(ctx, sameToken.Idempotency[0].Team, sameToken.Idempotency[0].ClientToken); err != nil {
		t.Errorf("the client token of change 2: %v", err)
	}
	if _, err := s.Idempotency(ctx, stored.Insert[0].Team, "tok-rename"); err != nil {
		t.Errorf("the client token of change 7: %v", err)
	}
}

// ConcurrentCommitsGroup: commits made at once share transactions, and
// each gets its own answer: of 64 purchases, 32 of them taking the GPUs
// and hours of another, exactly one of each pair commits. largest is the
// most changes a group of the driver has taken so far: it must be more
// than one.
func ConcurrentCommitsGroup(t *testing.T, s store.Full, largest func() int) {
	ctx := t.Context()
	const pairs = 32
	errs := make([]error, 2*pairs)
	var wg sync.WaitGroup
	for i := range 2 * pairs {
		wg.Go(func() {
			c := PurchaseChange(i % pairs)
			if i >= pairs {
				c = twin(c, fmt.Sprintf("cb-twin-%d", i))
			}
			errs[i] = s.Commit(ctx, c)
		})
	}
	wg.Wait()
	for i := range pairs {
		a, b := errs[i], errs[i+pairs]
		if (a == nil) == (b == nil) || (a != nil && !store.IsConflict(a)) || (b != nil && !store.IsConflict(b)) {
			t.Errorf("purchase %d and its twin: %v and %v; want one committed and one conflict", i, a, b)
		}
	}
	blocks, err := s.ListBlocks(ctx, store.BlockFilter{})
	mustDo(t, "listing blocks", err)
	if len(blocks) != pairs {
		t.Errorf("%d blocks stored, want %d", len(blocks), pairs)
	}
	if n := largest(); n < 2 {
		t.Errorf("the largest group took %d changes: 64 commits at once were not grouped", n)
	} else {
		t.Logf("the largest group: %d changes", n)
	}
}

// twin is c as the purchase of another block, id, on the same GPUs and
// hours, with its own client token, events and action, and no offering
// or charge.
func twin(c store.Change, id string) store.Change {
	c.Insert = append([]core.Block(nil), c.Insert...)
	c.Insert[0].ID = id
	c.Idempotency = []store.IdempotencyRecord{c.Idempotency[0]}
	c.Idempotency[0].ClientToken, c.Idempotency[0].Subject = "tok-"+id, id
	c.Offerings = nil
	c.Events = append([]core.Event(nil), c.Events...)
	for i := range c.Events {
		c.Events[i].ID += "-" + id
		c.Events[i].Subject = id
	}
	c.Journals = nil
	c.Actions = append([]core.Action(nil), c.Actions...)
	c.Actions[0].ID, c.Actions[0].Subject = "act-"+id, id
	return c
}
