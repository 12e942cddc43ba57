package awsapi

import (
	"net/http"
	"strconv"
	"time"
)

// allow takes one request of key (httpx.UserKey, httpx.AddrKey) from the
// limiter; over the rate it answers the request (throttled) and returns
// false. who says whose requests they were.
func (h *handler) allow(w http.ResponseWriter, reply replier, json bool, key, who string) bool {
	wait, ok := h.opts.Limiter.Allow(key)
	if !ok {
		throttled(w, reply, json, who, wait)
	}
	return ok
}

// throttled answers a request over its address's rate in its protocol's
// words, which the SDKs retry with backoff: EC2's RequestLimitExceeded
// (503), JSON 1.1's ThrottlingException (400).
func throttled(w http.ResponseWriter, reply replier, json bool, who string, wait time.Duration) {
	w.Header().Set("Retry-After", strconv.Itoa(int(max(1, (wait+time.Second-1)/time.Second))))
	msg := "too many requests " + who + "; retry in " + wait.Round(time.Millisecond).String()
	if json {
		reply.fail(http.StatusBadRequest, "ThrottlingException", msg)
		return
	}
	reply.fail(http.StatusServiceUnavailable, "RequestLimitExceeded", msg)
}
