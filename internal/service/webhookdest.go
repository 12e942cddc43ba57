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
// a cloud metadata service at 169.254.169.254, an admin port on
// localhost, or the server itself on one of its other addresses. The URL
// is checked when the webhook is created, and every connection is checked
// again on the address it dials, after name resolution, so a name that
// resolves to a refused address later is refused too.
//
// An address is public when it is in none of the special-purpose ranges
// of IANA's IPv4 and IPv6 registries (below) and is not an address of one
// of this server's network interfaces. For IPv6 only global unicast
// (2000::/3) can be public at all; the forms that carry an IPv4 address
// (IPv4-mapped, NAT64's well-known prefix, 6to4) are judged by that
// address.

// specialRange is a special-purpose range and what it is for, which the
// refusal names.
type specialRange struct {
	prefix netip.Prefix
	what   string
}

func special(prefix, what string) specialRange {
	return specialRange{netip.MustParsePrefix(prefix), what}
}

// specialIPv4 are the ranges of IANA's IPv4 special-purpose address
// registry (RFC 6890 and its updates), with the multicast and reserved
// space beside them. The ranges the registry marks globally reachable
// (AS112, AMT) are left out: they are public.
var specialIPv4 = []specialRange{
	special("0.0.0.0/8", `"this network" (RFC 791)`),
	special("10.0.0.0/8", "private-use (RFC 1918)"),
	special("100.64.0.0/10", "shared address space, carrier-grade NAT (RFC 6598)"),
	special("127.0.0.0/8", "loopback (RFC 1122)"),
	special("169.254.0.0/16", "link-local (RFC 3927)"),
	special("172.16.0.0/12", "private-use (RFC 1918)"),
	special("192.0.0.0/24", "IETF protocol assignments (RFC 6890)"),
	special("192.0.2.0/24", "documentation, TEST-NET-1 (RFC 5737)"),
	special("192.88.99.0/24", "6to4 relay anycast, deprecated (RFC 7526)"),
	special("192.168.0.0/16", "private-use (RFC 1918)"),
	special("198.18.0.0/15", "benchmarking (RFC 2544)"),
	special("198.51.100.0/24", "documentation, TEST-NET-2 (RFC 5737)"),
	special("203.0.113.0/24", "documentation, TEST-NET-3 (RFC 5737)"),
	special("224.0.0.0/4", "multicast (RFC 5771)"),
	special("255.255.255.255/32", "limited broadcast (RFC 919)"),
	special("240.0.0.0/4", "reserved (RFC 1112)"),
}

// specialIPv6 are the ranges of IANA's IPv6 special-purpose address
// registry that are not judged by an embedded IPv4 address. Those outside
// 2000::/3 are refused by that rule anyway; they are listed so that the
// refusal says what the address is.
var specialIPv6 = []specialRange{
	special("::/128", "unspecified (RFC 4291)"),
	special("::1/128", "loopback (RFC 4291)"),
	special("64:ff9b:1::/48", "local-use IPv4/IPv6 translation (RFC 8215)"),
	special("100::/64", "discard-only (RFC 6666)"),
	special("2001::/23", "IETF protocol assignments (RFC 2928), Teredo and benchmarking among them"),
	special("2001:db8::/32", "documentation (RFC 3849)"),
	special("3fff::/20", "documentation (RFC 9637)"),
	special("5f00::/16", "segment routing SIDs (RFC 9602)"),
	special("fc00::/7", "unique-local (RFC 4193)"),
	special("fe80::/10", "link-local (RFC 4291)"),
	special("ff00::/8", "multicast (RFC 4291)"),
}

var (
	globalUnicast = netip.MustParsePrefix("2000::/3")
	ipv4Mapped    = netip.MustParsePrefix("::ffff:0:0/96")
	nat64         = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour     = netip.MustParsePrefix("2002::/16")
)

// specialPurpose says which special-purpose range addr is in, or "" when
// it is in none: when it is an address of the public Internet.
func specialPurpose(addr netip.Addr) string {
	addr = addr.WithZone("")
	if !addr.IsValid() {
		return "not an IP address"
	}
	if addr.Is4() {
		return lookupSpecial(specialIPv4, addr)
	}
	// 1. IPv6 forms that carry an IPv4 address are judged by it.
	if v4, how, ok := embeddedIPv4(addr); ok {
		if what := lookupSpecial(specialIPv4, v4); what != "" {
			return fmt.Sprintf("%s, carrying %s, %s", how, v4, what)
		}
		return ""
	}
	// 2. The registry's IPv6 ranges.
	if what := lookupSpecial(specialIPv6, addr); what != "" {
		return what
	}
	// 3. Everything else outside global unicast is reserved by the IETF.
	if !globalUnicast.Contains(addr) {
		return "outside IPv6 global unicast 2000::/3 (RFC 4291)"
	}
	return ""
}

func lookupSpecial(ranges []specialRange, addr netip.Addr) string {
	for _, r := range ranges {
		if r.prefix.Contains(addr) {
			return "in " + r.prefix.String() + ", " + r.what
		}
	}
	return ""
}

// embeddedIPv4 returns the IPv4 address that an IPv4-mapped, NAT64
// (well-known prefix, RFC 6052) or 6to4 (RFC 3056) address stands for.
func embeddedIPv4(addr netip.Addr) (netip.Addr, string, bool) {
	b := addr.As16()
	switch {
	case ipv4Mapped.Contains(addr):
		return addr.Unmap(), "IPv4-mapped", true
	case nat64.Contains(addr):
		return netip.AddrFrom4([4]byte(b[12:16])), "NAT64", true
	case sixToFour.Contains(addr):
		return netip.AddrFrom4([4]byte(b[2:6])), "6to4", true
	}
	return netip.Addr{}, "", false
}

// interfaceAddrs lists the addresses of this server's network interfaces,
// as they are now.
func interfaceAddrs() ([]netip.Addr, error) {
	as, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("listing this server's addresses: %w", err)
	}
	out := make([]netip.Addr, 0, len(as))
	for _, a := range as {
		var ip net.IP
		switch a := a.(type) {
		case *net.IPNet:
			ip = a.IP
		case *net.IPAddr:
			ip = a.IP
		}
		if addr, ok := netip.AddrFromSlice(ip); ok {
			out = append(out, addr.Unmap())
		}
	}
	return out, nil
}

// checkDestination refuses an address that a webhook may not reach: one
// in a special-purpose range, or one of the server's own addresses as
// localAddrs lists them. When localAddrs fails, it refuses: it cannot tell.
func checkDestination(addr netip.Addr, localAddrs func() ([]netip.Addr, error)) error {
	if what := specialPurpose(addr); what != "" {
		return fmt.Errorf("%s is not a public address: it is %s", addr, what)
	}
	own, err := localAddrs()
	if err != nil {
		return fmt.Errorf("%s cannot be told apart from this server's own addresses: %w", addr, err)
	}
	plain := addr.WithZone("").Unmap()
	v4, how, carries := embeddedIPv4(plain) // NAT64 or 6to4 of one of ours
	for _, a := range own {
		switch a = a.WithZone("").Unmap(); {
		case a == plain:
			return fmt.Errorf("%s is not a public address: it is an address of this server", addr)
		case carries && a == v4:
			return fmt.Errorf("%s is not a public address: it is %s, carrying %s, an address of this server", addr, how, v4)
		}
	}
	return nil
}

// allowPrivateHint ends every refusal: what the operator can do about it.
const allowPrivateHint = "webhooks deliver only to public addresses (the operator may allow others with serve --webhook-allow-private)"

// checkWebhookHost refuses a host that names a non-public address: an
// address literal that checkDestination refuses, or localhost. A name is
// checked when it is dialled, on the addresses it resolves to then.
func checkWebhookHost(host string, localAddrs func() ([]netip.Addr, error)) error {
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return fmt.Errorf("url: %s is this machine; %s", host, allowPrivateHint)
	}
	if addr, err := netip.ParseAddr(strings.Trim(h, "[]")); err == nil {
		if err := checkDestination(addr, localAddrs); err != nil {
			return fmt.Errorf("url: %w; %s", err, allowPrivateHint)
		}
	}
	return nil
}

// deliveryClient is the default client of the delivery worker: it waits
// 10s for an answer, follows no redirect (a 3xx is a failed attempt) and,
// unless allowPrivate, connects only to public addresses, reading the
// server's own addresses at each connection. It uses no proxy, so that
// the address it checks is the receiver's.
func deliveryClient(allowPrivate bool) *http.Client {
	dialer := &net.Dialer{Timeout: 10 * time.Second}
	if !allowPrivate {
		dialer.Control = func(network, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("webhook destination %s: %w", address, err)
			}
			if err := checkDestination(ap.Addr(), interfaceAddrs); err != nil {
				return fmt.Errorf("webhook destination %w (the operator may allow it with serve --webhook-allow-private)", err)
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
