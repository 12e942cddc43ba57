package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"capblock/internal/core"
	"capblock/internal/store"
)

// webhooksTests check the methods of store.Webhooks.
var webhooksTests = []struct {
	name string
	run  func(*testing.T, Harness)
}{
	{"Webhooks", testWebhooks},
	{"WebhookErrors", testWebhookErrors},
	{"SealWebhookSecret", testSealWebhookSecret},
	{"Deliveries", testDeliveries},
	{"PendingDeliveries", testPendingDeliveries},
	{"PruneDeliveries", testPruneDeliveries},
	{"DeleteWebhookDeletesDeliveries", testDeleteWebhookDeliveries},
	{"WebhookCursor", testWebhookCursor},
}

func makeWebhook(id, team string, created time.Time, events ...string) core.Webhook {
	return core.Webhook{ID: id, Team: team, URL: "https://example.com/hooks/" + id, Events: events,
		Secret: "whsec_" + id, CreatedAt: created}
}

// deliveryBuilder builds delivery log lines:
// makeDelivery("wh-1", 3, 1).failed(500, hour(1)).obj().
type deliveryBuilder struct{ d core.Delivery }

// makeDelivery returns attempt of the delivery of event seq to webhook,
// made at hour(0) and not done.
func makeDelivery(webhook string, seq int64, attempt int) *deliveryBuilder {
	return &deliveryBuilder{core.Delivery{
		ID:       fmt.Sprintf("%s-%d-%d", webhook, seq, attempt),
		Webhook:  webhook,
		EventID:  fmt.Sprintf("evt-%d", seq),
		EventSeq: seq,
		Attempt:  attempt,
		Time:     hour(0),
		NextAt:   hour(0),
	}}
}

// failed records an answer with status (0: none) and the next attempt.
func (db *deliveryBuilder) failed(status int, next time.Time) *deliveryBuilder {
	db.d.Status, db.d.Error, db.d.NextAt = status, "it failed", next
	return db
}

// delivered records a 2xx answer, ending the delivery.
func (db *deliveryBuilder) delivered(status int) *deliveryBuilder {
	db.d.Status, db.d.NextAt, db.d.Done = status, time.Time{}, true
	return db
}

// gaveUp records a failed last attempt, ending the delivery.
func (db *deliveryBuilder) gaveUp(status int) *deliveryBuilder {
	db.d.Status, db.d.Error, db.d.NextAt, db.d.Done = status, "it failed", time.Time{}, true
	return db
}

func (db *deliveryBuilder) obj() core.Delivery { return db.d }

// withTeams returns a store with teams t1 and t2.
func withTeams(t *testing.T, h Harness) store.Full {
	s := h.Open(t)
	mustDo(t, "CreateTeam(t1)", s.CreateTeam(t.Context(), makeTeam("t1", "one")))
	mustDo(t, "CreateTeam(t2)", s.CreateTeam(t.Context(), makeTeam("t2", "two")))
	return s
}

// wantWebhooks fails the test unless ListWebhooks(team) returns want.
func wantWebhooks(t *testing.T, s store.Full, team string, want []core.Webhook) {
	t.Helper()
	got, err := s.ListWebhooks(t.Context(), team)
	mustDo(t, "ListWebhooks", err)
	if diff := cmp.Diff(want, got, cmpOpts...); diff != "" {
		t.Fatalf("ListWebhooks(%q) (-want +got):\n%s", team, diff)
	}
}

// wantDeliveries fails the test unless Deliveries(webhook, limit) returns want.
func wantDeliveries(t *testing.T, s store.Full, webhook string, limit int, want []core.Delivery) {
	t.Helper()
	got, err := s.Deliveries(t.Context(), webhook, limit)
	mustDo(t, "Deliveries", err)
	if diff := cmp.Diff(want, got, cmpOpts...); diff != "" {
		t.Fatalf("Deliveries(%s, %d) (-want +got):\n%s", webhook, limit, diff)
	}
}

func testWebhooks(t *testing.T, h Harness) {
	s := withTeams(t, h)
	wantWebhooks(t, s, "", nil)

	late := makeWebhook("wh-a", "t1", hour(2), "*")
	early := makeWebhook("wh-z", "t1", hour(1), "block.*", "plan.committed")
	same := makeWebhook("wh-b", "t1", hour(2), "job.*")
	other := makeWebhook("wh-c", "t2", hour(0), "block.active")
	// Times in another zone are the same instants.
	other.CreatedAt = other.CreatedAt.In(time.FixedZone("CET", 3600))
	for _, w := range []core.Webhook{late, early, same, other} {
		mustDo(t, "CreateWebhook("+w.ID+")", s.CreateWebhook(t.Context(), w))
	}
	other.CreatedAt = other.CreatedAt.UTC()

	got, err := s.Webhook(t.Context(), "wh-z")
	mustDo(t, "Webhook", err)
	if diff := cmp.Diff(early, got); diff != "" {
		t.Fatalf("Webhook(wh-z) (-want +got):\n%s", diff)
	}
	wantWebhooks(t, s, "t1", []core.Webhook{early, late, same})
	wantWebhooks(t, s, "t2", []core.Webhook{other})
	wantWebhooks(t, s, "", []core.Webhook{other, early, late, same})
	wantWebhooks(t, s, "t3", nil)

	mustDo(t, "DeleteWebhook", s.DeleteWebhook(t.Context(), "wh-a"))
	_, err = s.Webhook(t.Context(), "wh-a")
	wantErr(t, "Webhook of a deleted webhook", err, store.ErrNotFound)
	wantWebhooks(t, s, "t1", []core.Webhook{early, same})

	if h.Reopen == nil {
		return
	}
	s = h.Reopen(t, s)
	wantWebhooks(t, s, "", []core.Webhook{other, early, same})
}

func testWebhookErrors(t *testing.T, h Harness) {
	s := withTeams(t, h)
	w := makeWebhook("wh-1", "t1", hour(0), "*")
	mustDo(t, "CreateWebhook", s.CreateWebhook(t.Context(), w))

	dup := makeWebhook("wh-1", "t2", hour(1), "block.*")
	wantErr(t, "CreateWebhook with a taken id", s.CreateWebhook(t.Context(), dup), store.ErrConflict)
	wantErr(t, "CreateWebhook of an unknown team",
		s.CreateWebhook(t.Context(), makeWebhook("wh-2", "t9", hour(0), "*")), store.ErrNotFound)
	_, err := s.Webhook(t.Context(), "wh-9")
	wantErr(t, "Webhook of an unknown id", err, store.ErrNotFound)
	wantErr(t, "DeleteWebhook of an unknown id", s.DeleteWebhook(t.Context(), "wh-9"), store.ErrNotFound)
	wantWebhooks(t, s, "", []core.Webhook{w})

	mustDo(t, "DeleteWebhook", s.DeleteWebhook(t.Context(), "wh-1"))
	wantErr(t, "DeleteWebhook twice", s.DeleteWebhook(t.Context(), "wh-1"), store.ErrNotFound)
}

// testSealWebhookSecret: a webhook stored sealed reads back sealed, its
// clear secret not kept; a clear one is sealed once, only while it is
// still the clear secret given.
func testSealWebhookSecret(t *testing.T, h Harness) {
	s := withTeams(t, h)
	sealed := makeWebhook("wh-sealed", "t1", hour(0), "*")
	sealed.Secret = ""
	sealed.Sealed = core.SealedSecret{KeyID: "sk-0123456789abcdef", Nonce: []byte{0, 1, 2, 255}, Ciphertext: []byte("ciphertext\x00:with a colon")}
	clear := makeWebhook("wh-clear", "t1", hour(1), "*")
	for _, w := range []core.Webhook{sealed, clear} {
		mustDo(t, "CreateWebhook("+w.ID+")", s.CreateWebhook(t.Context(), w))
	}
	wantWebhooks(t, s, "t1", []core.Webhook{sealed, clear})

	other := core.SealedSecret{KeyID: "sk-fedcba9876543210", Nonce: []byte{9}, Ciphertext: []byte{8, 7}}
	wantErr(t, "SealWebhookSecret of a sealed secret",
		s.SealWebhookSecret(t.Context(), "wh-sealed", "", other), store.ErrConflict)
	wantErr(t, "SealWebhookSecret with another clear secret",
		s.SealWebhookSecret(t.Context(), "wh-clear", "whsec_other", other), store.ErrConflict)
	wantErr(t, "SealWebhookSecret of an unknown webhook",
		s.SealWebhookSecret(t.Context(), "wh-9", "whsec_wh-9", other), store.ErrConflict)
	mustDo(t, "SealWebhookSecret", s.SealWebhookSecret(t.Context(), "wh-clear", clear.Secret, other))
	wantErr(t, "SealWebhookSecret twice",
		s.SealWebhookSecret(t.Context(), "wh-clear", clear.Secret, sealed.Sealed), store.ErrConflict)
	clear.Secret, clear.Sealed = "", other
	wantWebhooks(t, s, "t1", []core.Webhook{sealed, clear})
}

func testDeliveries(t *testing.T, h Harness) {
	s := withTeams(t, h)
	mustDo(t, "CreateWebhook", s.CreateWebhook(t.Context(), makeWebhook("wh-1", "t1", hour(0), "*")))
	mustDo(t, "CreateWebhook", s.CreateWebhook(t.Context(), makeWebhook("wh-2", "t1", hour(0), "*")))
	wantDeliveries(t, s, "wh-1", 0, nil)

	scheduled := makeDelivery("wh-1", 7, 0).obj()
	failed := makeDelivery("wh-1", 7, 1).failed(503, hour(1)).obj()
	noAnswer := makeDelivery("wh-1", 7, 2).failed(0, hour(2)).obj()
	ok := makeDelivery("wh-1", 7, 3).delivered(204).obj()
	next := makeDelivery("wh-1", 9, 0).obj()
	elsewhere := makeDelivery("wh-2", 7, 0).obj()
	// Out of order: the log is ordered by event seq then attempt.
	for _, d := range []core.Delivery{next, scheduled, noAnswer, failed, ok, elsewhere} {
		mustDo(t, "AppendDelivery("+d.ID+")", s.AppendDelivery(t.Context(), d))
	}
	wantDeliveries(t, s, "wh-1", 0, []core.Delivery{scheduled, failed, noAnswer, ok, next})
	wantDeliveries(t, s, "wh-1", 2, []core.Delivery{ok, next})
	wantDeliveries(t, s, "wh-2", 10, []core.Delivery{elsewhere})
	wantDeliveries(t, s, "wh-9", 0, nil)

	again := makeDelivery("wh-1", 7, 1).delivered(200).obj()
	again.ID = "another-id"
	wantErr(t, "AppendDelivery of a stored attempt", s.AppendDelivery(t.Context(), again), store.ErrConflict)
	sameID := makeDelivery("wh-1", 8, 0).obj()
	sameID.ID = ok.ID
	wantErr(t, "AppendDelivery with a taken id", s.AppendDelivery(t.Context(), sameID), store.ErrConflict)
	wantErr(t, "AppendDelivery to an unknown webhook",
		s.AppendDelivery(t.Context(), makeDelivery("wh-9", 7, 0).obj()), store.ErrNotFound)
	wantDeliveries(t, s, "wh-1", 0, []core.Delivery{scheduled, failed, noAnswer, ok, next})

	if h.Reopen == nil {
		return
	}
	s = h.Reopen(t, s)
	wantDeliveries(t, s, "wh-1", 0, []core.Delivery{scheduled, failed, noAnswer, ok, next})
}

func testPendingDeliveries(t *testing.T, h Harness) {
	s := withTeams(t, h)
	for _, id := range []string{"wh-2", "wh-1"} {
		mustDo(t, "CreateWebhook", s.CreateWebhook(t.Context(), makeWebhook(id, "t1", hour(0), "*")))
	}
	pending := func() []core.Delivery {
		t.Helper()
		ds, err := s.PendingDeliveries(t.Context())
		mustDo(t, "PendingDeliveries", err)
		return ds
	}
	if got := pending(); len(got) != 0 {
		t.Fatalf("PendingDeliveries of an empty log: %v", got)
	}
	lines := []core.Delivery{
		// Event 3 to wh-1: delivered on the second attempt.
		makeDelivery("wh-1", 3, 0).obj(),
		makeDelivery("wh-1", 3, 1).failed(500, hour(1)).obj(),
		makeDelivery("wh-1", 3, 2).delivered(200).obj(),
		// Event 4 to wh-1: retrying.
		makeDelivery("wh-1", 4, 0).obj(),
		makeDelivery("wh-1", 4, 1).failed(0, hour(2)).obj(),
		// Event 5 to wh-1: scheduled only.
		makeDelivery("wh-1", 5, 0).obj(),
		// Event 2 to wh-2: given up.
		makeDelivery("wh-2", 2, 0).obj(),
		makeDelivery("wh-2", 2, 1).gaveUp(500).obj(),
		// Event 1 to wh-2: scheduled only.
		makeDelivery("wh-2", 1, 0).obj(),
	}
	for _, d := range lines {
		mustDo(t, "AppendDelivery("+d.ID+")", s.AppendDelivery(t.Context(), d))
	}
	want := []core.Delivery{lines[4], lines[5], lines[8]}
	if diff := cmp.Diff(want, pending(), cmpOpts...); diff != "" {
		t.Fatalf("PendingDeliveries (-want +got):\n%s", diff)
	}
}

// at returns a line made at t.
func (db *deliveryBuilder) at(t time.Time) *deliveryBuilder { db.d.Time = t; return db }

// testPruneDeliveries removes the deliveries finished before a time, all
// their lines, and keeps every other line, unfinished ones above all.
func testPruneDeliveries(t *testing.T, h Harness) {
	s := withTeams(t, h)
	for _, id := range []string{"wh-1", "wh-2"} {
		mustDo(t, "CreateWebhook", s.CreateWebhook(t.Context(), makeWebhook(id, "t1", hour(0), "*")))
	}
	lines := []core.Delivery{
		// Event 1 to wh-1: delivered at hour 2, before the cut: pruned.
		makeDelivery("wh-1", 1, 0).obj(),
		makeDelivery("wh-1", 1, 1).failed(500, hour(1)).obj(),
		makeDelivery("wh-1", 1, 2).at(hour(2)).delivered(200).obj(),
		// Event 2 to wh-1: given up at hour 5, after the cut: kept.
		makeDelivery("wh-1", 2, 0).obj(),
		makeDelivery("wh-1", 2, 1).at(hour(5)).gaveUp(500).obj(),
		// Event 3 to wh-1: still retrying, its lines older than the cut: kept.
		makeDelivery("wh-1", 3, 0).obj(),
		makeDelivery("wh-1", 3, 1).failed(0, hour(9)).obj(),
		// Event 1 to wh-2: given up at hour 3: pruned.
		makeDelivery("wh-2", 1, 0).obj(),
		makeDelivery("wh-2", 1, 1).at(hour(3)).gaveUp(0).obj(),
	}
	for _, d := range lines {
		mustDo(t, "AppendDelivery("+d.ID+")", s.AppendDelivery(t.Context(), d))
	}
	n, err := s.PruneDeliveries(t.Context(), hour(4))
	mustDo(t, "PruneDeliveries", err)
	if n != 5 {
		t.Errorf("PruneDeliveries removed %d lines, want 5", n)
	}
	wantDeliveries(t, s, "wh-1", 0, lines[3:7])
	wantDeliveries(t, s, "wh-2", 0, nil)
	pending, err := s.PendingDeliveries(t.Context())
	mustDo(t, "PendingDeliveries", err)
	if diff := cmp.Diff([]core.Delivery{lines[6]}, pending, cmpOpts...); diff != "" {
		t.Fatalf("PendingDeliveries after pruning (-want +got):\n%s", diff)
	}
	// Nothing more to prune at the same cut.
	if n, err := s.PruneDeliveries(t.Context(), hour(4)); err != nil || n != 0 {
		t.Errorf("PruneDeliveries again: %d, %v; want 0", n, err)
	}
}

func testDeleteWebhookDeliveries(t *testing.T, h Harness) {
	s := withTeams(t, h)
	mustDo(t, "CreateWebhook", s.CreateWebhook(t.Context(), makeWebhook("wh-1", "t1", hour(0), "*")))
	mustDo(t, "AppendDelivery", s.AppendDelivery(t.Context(), makeDelivery("wh-1", 1, 0).obj()))
	mustDo(t, "DeleteWebhook", s.DeleteWebhook(t.Context(), "wh-1"))
	wantDeliveries(t, s, "wh-1", 0, nil)
	ds, err := s.PendingDeliveries(t.Context())
	mustDo(t, "PendingDeliveries", err)
	if len(ds) != 0 {
		t.Fatalf("PendingDeliveries after DeleteWebhook: %v", ds)
	}
	// The id may be used again, with a log of its own.
	mustDo(t, "CreateWebhook again", s.CreateWebhook(t.Context(), makeWebhook("wh-1", "t1", hour(1), "*")))
	mustDo(t, "AppendDelivery again", s.AppendDelivery(t.Context(), makeDelivery("wh-1", 1, 0).obj()))
}

func testWebhookCursor(t *testing.T, h Harness) {
	s := h.Open(t)
	cursor := func() int64 {
		t.Helper()
		seq, err := s.WebhookCursor(t.Context())
		mustDo(t, "WebhookCursor", err)
		return seq
	}
	if got := cursor(); got != 0 {
		t.Fatalf("WebhookCursor of a new store = %d, want 0", got)
	}
	mustDo(t, "SetWebhookCursor(5)", s.SetWebhookCursor(t.Context(), 5))
	mustDo(t, "SetWebhookCursor(9)", s.SetWebhookCursor(t.Context(), 9))
	if got := cursor(); got != 9 {
		t.Fatalf("WebhookCursor = %d, want 9", got)
	}
	mustDo(t, "SetWebhookCursor(3)", s.SetWebhookCursor(t.Context(), 3))
	if got := cursor(); got != 9 {
		t.Fatalf("WebhookCursor after moving it back = %d, want it kept at 9", got)
	}
	if h.Reopen == nil {
		return
	}
	s = h.Reopen(t, s)
	if got := cursor(); got != 9 {
		t.Fatalf("WebhookCursor after reopening = %d, want 9", got)
	}
}
