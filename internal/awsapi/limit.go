package awsapi

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// addrLimiter bounds the requests of each client address, counted before
// the signature is checked: a flood of requests signed with made-up keys
// costs a key lookup each, which the address pays for. Addresses are the
// TCP peer's (api.ClientAddr: an IPv6 /64), never a header.
type addrLimiter struct {
	rps   rate.Limit
	burst int
	now   func() time.Time

	mu        sync.Mutex
	buckets   map[string]*addrBucket
	lastSweep time.Time
}

type addrBucket struct {
	lim  *rate.Limiter
	used time.Time
}

// maxLimitedAddrs bounds the buckets; past it, idle ones are swept, and
// while none is idle new addresses share one bucket.
const maxLimitedAddrs = 100_000

func newAddrLimiter(rps float64, burst int) *addrLimiter {
	return &addrLimiter{rps: rate.Limit(rps), burst: max(burst, 1), now: time.Now, buckets: map[string]*addrBucket{}}
}

// allow takes one request from addr's bucket, or says how long to wait.
// A limiter without a rate lets everything through.
func (l *addrLimiter) allow(addr string) (time.Duration, bool) {
	if l == nil || l.rps <= 0 {
		return 0, true
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets[addr]
	if !ok {
		if len(l.buckets) >= maxLimitedAddrs {
			l.sweep(now)
		}
		if len(l.buckets) >= maxLimitedAddrs {
			addr = "*"
			b = l.buckets[addr]
		}
		if b == nil {
			b = &addrBucket{lim: rate.NewLimiter(l.rps, l.burst)}
			l.buckets[addr] = b
		}
	}
	b.used = now
	r := b.lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return d, false
	}
	return 0, true
}

// sweep forgets the buckets idle long enough to be full again.
func (l *addrLimiter) sweep(now time.Time) {
	if now.Sub(l.lastSweep) < time.Second {
		return
	}
	l.lastSweep = now
	refill := time.Duration(float64(l.burst) / float64(l.rps) * float64(time.Second))
	for k, b := range l.buckets {
		if now.Sub(b.used) >= refill {
			delete(l.buckets, k)
		}
	}
}

// allow takes one request of addr from the limiter; over the rate it
// answers the request (throttled) and returns false.
func (h *handler) allow(w http.ResponseWriter, reply replier, json bool, addr string) bool {
	wait, ok := h.limiter.allow(addr)
	if !ok {
		throttled(w, reply, json, addr, wait)
	}
	return ok
}

// throttled answers a request over its address's rate in its protocol's
// words, which the SDKs retry with backoff: EC2's RequestLimitExceeded
// (503), JSON 1.1's ThrottlingException (400).
func throttled(w http.ResponseWriter, reply replier, json bool, addr string, wait time.Duration) {
	w.Header().Set("Retry-After", strconv.Itoa(int(max(1, (wait+time.Second-1)/time.Second))))
	msg := "too many requests from " + addr + "; retry in " + wait.Round(time.Millisecond).String()
	if json {
		reply.fail(http.StatusBadRequest, "ThrottlingException", msg)
		return
	}
	reply.fail(http.StatusServiceUnavailable, "RequestLimitExceeded", msg)
}
