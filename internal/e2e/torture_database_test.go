package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// databaseCheck is what the database holds against what the clients saw.
type databaseCheck struct {
	stored, live int
	lost         []string // acknowledged purchases or cancels the database does not hold
	phantoms     []string // blocks no client asked for, or held against what it was told
	doubles      int      // pairs of live blocks sharing a GPU at overlapping times
}

// checkDatabase compares the stored blocks, client tokens and GPU
// allocations with what the clients asked and saw, and describes each
// difference.
func (r *tortureRun) checkDatabase(t *testing.T, dsn string) databaseCheck {
	t.Helper()
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	type stored struct {
		id, name, state string
		start, end      time.Time
		count           int
	}
	rows, err := conn.Query(ctx, `SELECT id, name, state, start_time, end_time, count FROM blocks`)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string][]stored{}
	var d databaseCheck
	for rows.Next() {
		var b stored
		if err := rows.Scan(&b.id, &b.name, &b.state, &b.start, &b.end, &b.count); err != nil {
			t.Fatal(err)
		}
		byName[b.name] = append(byName[b.name], b)
		d.stored++
		if b.state == "scheduled" {
			d.live++
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	subjects := map[string]string{}
	rows, err = conn.Query(ctx, `SELECT client_token, subject FROM idempotency`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var token, subject string
		if err := rows.Scan(&token, &subject); err != nil {
			t.Fatal(err)
		}
		subjects[token] = subject
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	// Lost: an acknowledged purchase not stored as answered, or an
	// acknowledged cancel not stored; a block cancelled that no client
	// tried to cancel is lost too.
	for token, id := range r.acked {
		bs := byName[token]
		switch {
		case len(bs) == 0 || bs[0].id != id:
			d.lost = append(d.lost, fmt.Sprintf("purchase %s was acknowledged as block %s; stored under its name: %v", token, id, bs))
		case r.cancelled[token] && bs[0].state != "cancelled":
			d.lost = append(d.lost, fmt.Sprintf("the cancel of block %s (%s) was acknowledged; it is %s", id, token, bs[0].state))
		case !r.cancelTried[token] && bs[0].state != "scheduled":
			d.lost = append(d.lost, fmt.Sprintf("block %s (%s) is %s, but no client cancelled it", id, token, bs[0].state))
		}
	}
	// Phantoms: a block under a name no client bought, a second block
	// under one, one a refused purchase left, or terms other than asked.
	for name, bs := range byName {
		terms, asked := r.terms[name]
		w := r.windows[terms.window]
		want := stored{start: w.Add(time.Duration(terms.start) * time.Hour), end: w.Add(time.Duration(terms.end) * time.Hour), count: terms.count}
		for i, b := range bs {
			switch {
			case !asked:
				d.phantoms = append(d.phantoms, fmt.Sprintf("block %s named %q, which no client bought", b.id, name))
			case i > 0:
				d.phantoms = append(d.phantoms, fmt.Sprintf("block %s is a second block of purchase %s (the first is %s)", b.id, name, bs[0].id))
			case r.refused[name]:
				d.phantoms = append(d.phantoms, fmt.Sprintf("block %s (%s, %s) stored for a purchase refused for want of capacity", b.id, name, b.state))
			case !b.start.Equal(want.start) || !b.end.Equal(want.end) || b.count != want.count:
				d.phantoms = append(d.phantoms, fmt.Sprintf("block %s (%s) holds %s..%s × %d; the client asked %s..%s × %d",
					b.id, name, ts(b.start), ts(b.end), b.count, ts(want.start), ts(want.end), want.count))
			case subjects[name] != b.id:
				d.phantoms = append(d.phantoms, fmt.Sprintf("block %s (%s) is not what its client token records (%q)", b.id, name, subjects[name]))
			}
		}
	}
	for token, subject := range subjects {
		if _, asked := r.terms[token]; !asked {
			d.phantoms = append(d.phantoms, fmt.Sprintf("client token %q, which no client sent, records %s", token, subject))
		}
	}
	// Double bookings, GPU by GPU.
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM allocations x JOIN allocations y
		ON x.node = y.node AND x.gpus && y.gpus AND x.block_id < y.block_id AND x.during && y.during
		WHERE x.live AND y.live`).Scan(&d.doubles); err != nil {
		t.Fatal(err)
	}
	return d
}
