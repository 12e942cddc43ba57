package api

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// fakeNow is a clock that moves only when told.
type fakeNow struct{ t time.Time }

func (c *fakeNow) now() time.Time          { return c.t }
func (c *fakeNow) advance(d time.Duration) { c.t = c.t.Add(d) }

func TestClientAddr(t *testing.T) {
	tests := map[string]struct {
		remote, want string
	}{
		"IPv4":                 {remote: "203.0.113.7:51000", want: "203.0.113.7"},
		"IPv4-mapped":          {remote: "[::ffff:203.0.113.7]:51000", want: "203.0.113.7"},
		"IPv6 is its /64":      {remote: "[2001:db8:1:2:3:4:5:6]:443", want: "2001:db8:1:2::/64"},
		"IPv6 with a zone":     {remote: "[fe80::1%eth0]:443", want: "fe80::/64"},
		"no port":              {remote: "198.51.100.1", want: "198.51.100.1"},
		"not an address":       {remote: "pipe", want: "pipe"},
		"empty (no TCP peer)":  {remote: "", want: ""},
		"IPv6 loopback":        {remote: "[::1]:80", want: "::/64"},
		"another /64 is other": {remote: "[2001:db8:1:3::1]:443", want: "2001:db8:1:3::/64"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := clientAddr(tc.remote); got != tc.want {
				t.Errorf("clientAddr(%q) = %q, want %q", tc.remote, got, tc.want)
			}
		})
	}
}

// TestLimiterBuckets: each key has its own bucket; a bucket refills at the
// rate; a limiter without a rate lets everything through.
func TestLimiterBuckets(t *testing.T) {
	clock := &fakeNow{t: time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)}
	l := newLimiter(1, 2)
	l.now = clock.now
	var got []string
	take := func(key string) {
		wait, ok := l.allow(key)
		got = append(got, fmt.Sprintf("%s %v %s", key, ok, wait))
	}
	take(userKey("u1"))
	take(userKey("u1"))
	take(userKey("u1"))
	take(userKey("u2"))
	take(addrKey("10.0.0.1"))
	clock.advance(time.Second)
	take(userKey("u1"))
	take(userKey("u1"))
	want := []string{
		"user:u1 true 0s", "user:u1 true 0s", "user:u1 false 1s", "user:u2 true 0s", "addr:10.0.0.1 true 0s",
		"user:u1 true 0s", "user:u1 false 1s",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
	open := newLimiter(0, 0)
	for range 1000 {
		if _, ok := open.allow(userKey("u1")); !ok {
			t.Fatal("a limiter without a rate refused a request")
		}
	}
}

// TestLimiterSweep: buckets idle long enough to be full again are
// dropped, so the limiter does not grow with every address it ever saw;
// a bucket still refilling is kept.
func TestLimiterSweep(t *testing.T) {
	clock := &fakeNow{t: time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)}
	l := newLimiter(1, 100) // an empty bucket is full again after 100 s
	l.now = clock.now
	for i := range 1000 {
		l.allow(addrKey(fmt.Sprintf("10.0.%d.%d", i/256, i%256)))
	}
	clock.advance(50 * time.Second)
	for range 100 {
		l.allow(userKey("busy"))
	}
	clock.advance(51 * time.Second) // past a minute since the last sweep
	l.allow(userKey("other"))
	var keys []string
	for k := range l.buckets {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if diff := cmp.Diff([]string{"user:busy", "user:other"}, keys); diff != "" {
		t.Errorf("buckets after the sweep (-want +got):\n%s", diff)
	}
	if l.addrs != 0 {
		t.Errorf("addrs = %d after the sweep, want 0", l.addrs)
	}
	if _, ok := l.allow(userKey("busy")); !ok {
		t.Error("busy, refilled for 51 s, refused")
	}
}

// TestLimiterAddressBound: past maxAddrBuckets, new addresses share one
// bucket; users still get their own.
func TestLimiterAddressBound(t *testing.T) {
	clock := &fakeNow{t: time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)}
	l := newLimiter(0.001, 1)
	l.now = clock.now
	for i := range maxAddrBuckets {
		if _, ok := l.allow(addrKey(fmt.Sprint(i))); !ok {
			t.Fatalf("address %d refused its first request", i)
		}
	}
	if _, ok := l.allow(addrKey("one more")); !ok {
		t.Fatal("the first address past the bound was refused: the shared bucket was full already")
	}
	if _, ok := l.allow(addrKey("and another")); ok {
		t.Error("a second address past the bound had a bucket of its own")
	}
	if _, ok := l.allow(userKey("u1")); !ok {
		t.Error("a user past the addresses' bound was refused")
	}
}

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
