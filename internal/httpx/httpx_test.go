package httpx

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
			if got := ClientAddr(tc.remote); got != tc.want {
				t.Errorf("ClientAddr(%q) = %q, want %q", tc.remote, got, tc.want)
			}
		})
	}
}

// TestLimiterBuckets: each key has its own bucket; a bucket refills at the
// rate; a limiter without a rate lets everything through.
func TestLimiterBuckets(t *testing.T) {
	clock := &fakeNow{t: time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)}
	l := NewLimiter(1, 2)
	l.now = clock.now
	var got []string
	take := func(key string) {
		wait, ok := l.Allow(key)
		got = append(got, fmt.Sprintf("%s %v %s", key, ok, wait))
	}
	take(UserKey("u1"))
	take(UserKey("u1"))
	take(UserKey("u1"))
	take(UserKey("u2"))
	take(AddrKey("10.0.0.1"))
	clock.advance(time.Second)
	take(UserKey("u1"))
	take(UserKey("u1"))
	want := []string{
		"user:u1 true 0s", "user:u1 true 0s", "user:u1 false 1s", "user:u2 true 0s", "addr:10.0.0.1 true 0s",
		"user:u1 true 0s", "user:u1 false 1s",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
	open := NewLimiter(0, 0)
	for range 1000 {
		if _, ok := open.Allow(UserKey("u1")); !ok {
			t.Fatal("a limiter without a rate refused a request")
		}
	}
}

// TestLimiterSweep: buckets idle long enough to be full again are
// dropped, so the limiter does not grow with every address it ever saw;
// a bucket still refilling is kept.
func TestLimiterSweep(t *testing.T) {
	clock := &fakeNow{t: time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)}
	l := NewLimiter(1, 100) // an empty bucket is full again after 100 s
	l.now = clock.now
	for i := range 1000 {
		l.Allow(AddrKey(fmt.Sprintf("10.0.%d.%d", i/256, i%256)))
	}
	clock.advance(50 * time.Second)
	for range 100 {
		l.Allow(UserKey("busy"))
	}
	clock.advance(51 * time.Second) // past a minute since the last sweep
	l.Allow(UserKey("other"))
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
	if _, ok := l.Allow(UserKey("busy")); !ok {
		t.Error("busy, refilled for 51 s, refused")
	}
}

// TestLimiterAddressBound: past maxAddrBuckets, new addresses share one
// bucket; users still get their own.
func TestLimiterAddressBound(t *testing.T) {
	clock := &fakeNow{t: time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)}
	l := NewLimiter(0.001, 1)
	l.now = clock.now
	for i := range maxAddrBuckets {
		if _, ok := l.Allow(AddrKey(fmt.Sprint(i))); !ok {
			t.Fatalf("address %d refused its first request", i)
		}
	}
	if _, ok := l.Allow(AddrKey("one more")); !ok {
		t.Fatal("the first address past the bound was refused: the shared bucket was full already")
	}
	if _, ok := l.Allow(AddrKey("and another")); ok {
		t.Error("a second address past the bound had a bucket of its own")
	}
	if _, ok := l.Allow(UserKey("u1")); !ok {
		t.Error("a user past the addresses' bound was refused")
	}
}
