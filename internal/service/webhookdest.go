package service

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"syscall"
	"time"
)

// Webhooks deliver only to public addresses unless the operator allows
// others (Config.AllowPrivateWebhooks, serve --webhook-allow-private): a
// team must not be able to make the server call its own network, such as
// a cloud metadata service at 169.254.169.254 or an admin port on
// localhost. The URL is checked when the webhook is created, and every
// connection is checked again on the address it dials, after name
// resolution, so a name that resolves to a private address later is
// refused too.

// nonPublic are the ranges, beyond loopback, private, link-local,
// multicast and unspecified addresses, that are not the public Internet.
var nonPublic = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),     // "this network"
	netip.MustParsePrefix("100.64.0.0/10"), // carrier-grade NAT
	netip.MustParsePrefix("192.0.0.0/24"),  // IETF protocol assignments
	netip.MustParsePrefix("198.18.0.0/15"), // benchmarking
	netip.MustParsePrefix("240.0.0.0/4"),   // reserved, broadcast
	netip.MustParsePrefix("64:ff9b::/96"),  // NAT64, can reach private IPv4
}

// publicAddr reports whether a webhook may deliver to addr.
func publicAddr(addr netip.Addr) bool {
	addr = addr.Unmap()
	if !addr.IsValid() || addr.IsLoopback() || addr.IsPrivate() || addr.IsLinkLocalUnicast() ||
		addr.IsLinkLocalMulticast() || addr.IsInterfaceLocalMulticast() || addr.IsMulticast() || addr.IsUnspecified() {
		return false
	}
	for _, p := range nonPublic {
		if p.Contains(addr) {
			return false
		}
	}
	return true
}

// checkWebhookHost refuses a host that names a non-public address: an
// address literal in such a range, or localhost.
func checkWebhookHost(host string) error {
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return fmt.Errorf("url: %s is this machine; webhooks deliver only to public addresses (the operator may allow others with serve --webhook-allow-private)", host)
	}
	if addr, err := netip.ParseAddr(strings.Trim(h, "[]")); err == nil && !publicAddr(addr) {
		return fmt.Errorf("url: %s is a loopback, private or link-local address; webhooks deliver only to public addresses (the operator may allow others with serve --webhook-allow-private)", host)
	}
	return nil
}

// deliveryClient is the default client of the delivery worker: it waits
// 10s for an answer, follows no redirect (a 3xx is a failed attempt) and,
// unless allowPrivate, connects only to public addresses. It uses no
// proxy, so that the address it checks is the receiver's.
func deliveryClient(allowPrivate bool) *http.Client {
	dialer := &net.Dialer{Timeout: 10 * time.Second}
	if !allowPrivate {
		dialer.Control = func(network, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("webhook destination %s: %w", address, err)
			}
			if !publicAddr(ap.Addr()) {
				return fmt.Errorf("webhook destination %s is not a public address (the operator may allow it with serve --webhook-allow-private)", ap.Addr())
			}
			return nil
		}
	}
	return &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			DialContext:         dialer.DialContext,
			ForceAttemptHTTP2:   true,
			MaxIdleConns:        100,
			IdleConnTimeout:     90 * time.Second,
			TLSHandshakeTimeout: 10 * time.Second,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}
