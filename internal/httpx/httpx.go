// Package httpx holds what capblock's HTTP front ends share: the client
// address a request is counted by, and one keyed rate limiter, which the
// REST API and the AWS endpoint draw from together.
package httpx

import (
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// ClientAddr is what requests without a valid token are counted by: the
// IP address of the TCP peer, never a header such as X-Forwarded-For,
// which the client writes itself; for IPv6 its /64, since one subscriber
// is commonly given a whole /64 to pick addresses from.
func ClientAddr(remote string) string {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	addr = addr.WithZone("").Unmap()
	if addr.Is6() {
		return netip.PrefixFrom(addr, 64).Masked().String()
	}
	return addr.String()
}

// UserKey and AddrKey name the limiter's buckets: one per user, one per
// client address for requests without a valid token.
func UserKey(id string) string   { return "user:" + id }
func AddrKey(addr string) string { return "addr:" + addr }

// maxAddrBuckets bounds the buckets of client addresses, which a flood
// from ever new addresses could otherwise grow without end. Past it, the
// addresses not yet tracked share overflowBucket, until idle buckets are
// swept. Users' buckets are not counted: users are as many as the
// operator made.
const maxAddrBuckets = 100_000

const overflowBucket = "addr:*"

// Limiter is a token bucket per key (UserKey, AddrKey), all with one rate
// and burst. Every front end takes from one Limiter, so that a user or an
// address has one budget whichever protocol it speaks.
type Limiter struct {
	rps   rate.Limit
	burst int
	now   func() time.Time

	mu        sync.Mutex
	buckets   map[string]*bucket
	addrs     int // buckets of client addresses
	lastSweep time.Time
}

type bucket struct {
	*rate.Limiter
	used time.Time // the last request taken from it
}

// NewLimiter returns a Limiter of rps requests a second with bursts of
// burst; rps 0 lets everything through.
func NewLimiter(rps float64, burst int) *Limiter {
	return &Limiter{rps: rate.Limit(rps), burst: burst, now: time.Now, buckets: map[string]*bucket{}}
}

// Allow takes one request from key's bucket, or says how long to wait for
// one. A nil Limiter, or one with no rate, lets everything through.
func (l *Limiter) Allow(key string) (time.Duration, bool) {
	if l == nil || l.rps <= 0 {
		return 0, true
	}
	now := l.now()
	l.mu.Lock()
	l.sweep(now)
	b, ok := l.buckets[key]
	if !ok {
		isAddr := strings.HasPrefix(key, "addr:")
		if isAddr && l.addrs >= maxAddrBuckets {
			key, isAddr = overflowBucket, false
			b = l.buckets[key]
		}
		if b == nil {
			b = &bucket{Limiter: rate.NewLimiter(l.rps, l.burst)}
			l.buckets[key] = b
			if isAddr {
				l.addrs++
			}
		}
	}
	b.used = now
	r := b.ReserveN(now, 1)
	l.mu.Unlock()
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return d, false
	}
	return 0, true
}

// sweep drops the buckets that have been idle long enough to fill up
// again: a full bucket is what a new one would be, so nothing is lost.
// It runs at most once a minute, or once a second while the addresses'
// buckets are at their bound. l.mu is held.
func (l *Limiter) sweep(now time.Time) {
	since := now.Sub(l.lastSweep)
	if since < time.Minute && (l.addrs < maxAddrBuckets || since < time.Second) {
		return
	}
	l.lastSweep = now
	refill := time.Duration(float64(l.burst) / float64(l.rps) * float64(time.Second))
	for k, b := range l.buckets {
		if now.Sub(b.used) >= refill {
			delete(l.buckets, k)
			if strings.HasPrefix(k, "addr:") && k != overflowBucket {
				l.addrs--
			}
		}
	}
}
