package api

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// fakeNow is a clock that moves only when told.
type fakeNow struct{ t time.Time }

func (c *fakeNow) now() time.Time          { return c.t }
func (c *fakeNow) advance(d time.Duration) { c.t = c.t.Add(d) }

// TestAnonymousAudits: the first request of each address in a minute is
// recorded, of at most maxAnonymousAudits addresses a minute.
func TestAnonymousAudits(t *testing.T) {
	clock := &fakeNow{t: time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)}
	var a anonymousAudits
	var got []bool
	got = append(got, a.first("10.0.0.1", clock.now()), a.first("10.0.0.1", clock.now()), a.first("10.0.0.2", clock.now()))
	clock.advance(59 * time.Second)
	got = append(got, a.first("10.0.0.1", clock.now()))
	clock.advance(time.Second)
	got = append(got, a.first("10.0.0.1", clock.now()), a.first("10.0.0.1", clock.now()))
	if diff := cmp.Diff([]bool{true, false, true, false, true, false}, got); diff != "" {
		t.Errorf("recorded (-want +got):\n%s", diff)
	}

	clock.advance(time.Minute)
	var b anonymousAudits
	recorded := 0
	for i := range 2 * maxAnonymousAudits {
		if b.first(fmt.Sprint(i), clock.now()) {
			recorded++
		}
	}
	if recorded != maxAnonymousAudits {
		t.Errorf("%d addresses recorded in a minute, want %d", recorded, maxAnonymousAudits)
	}
	clock.advance(time.Minute)
	if !b.first("a new minute", clock.now()) {
		t.Error("nothing recorded a minute later")
	}
}
