package service

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"capblock/internal/core"
)

// TestCheckDestination: every special-purpose range of IANA's registries
// and every address of the server's own interfaces is refused, whatever
// form the address takes; public addresses pass. The server's addresses
// here are a fake list, with a public one among them.
func TestCheckDestination(t *testing.T) {
	own := func() ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("93.184.215.14"),
			netip.MustParseAddr("2606:2800:21f:cb07:6820:80da:af6b:8b2c"), netip.MustParseAddr("fe80::1%eth0")}, nil
	}
	tests := map[string]struct {
		addrs []string
		want  string // a part of the refusal; "" when allowed
	}{
		"public IPv4": {addrs: []string{"8.8.8.8", "1.1.1.1", "203.0.114.7", "192.0.3.1", "100.128.0.1", "172.32.0.1",
			"198.20.0.1", "223.255.255.255", "192.31.196.1", "192.52.193.1", "192.175.48.1"}},
		"public IPv6": {addrs: []string{"2606:4700::1111", "2a00:1450:4001::200e", "2001:200::1", "2620:4f:8000::1",
			"64:ff9b::808:808", "::ffff:8.8.8.8", "2002:808:808::1", "2001:4860:4860::8888"}},
		"this network":     {addrs: []string{"0.0.0.0", "0.1.2.3"}, want: "0.0.0.0/8"},
		"private-use":      {addrs: []string{"10.1.2.3", "172.16.0.1", "172.31.255.254", "192.168.1.1"}, want: "private-use"},
		"shared CGN":       {addrs: []string{"100.64.0.1", "100.127.255.254"}, want: "100.64.0.0/10"},
		"loopback":         {addrs: []string{"127.0.0.1", "127.8.9.10", "::1"}, want: "loopback"},
		"link-local":       {addrs: []string{"169.254.169.254", "fe80::1", "fe80::1%eth0", "febf::1"}, want: "link-local"},
		"IETF assignments": {addrs: []string{"192.0.0.8", "192.0.0.170", "2001::1", "2001:2::1", "2001:1ff::1"}, want: "IETF protocol assignments"},
		"documentation": {addrs: []string{"192.0.2.1", "198.51.100.7", "203.0.113.9", "2001:db8::1", "2001:db8:ffff::1",
			"3fff::1", "3fff:fff::1"}, want: "documentation"},
		"6to4 relay":       {addrs: []string{"192.88.99.1"}, want: "192.88.99.0/24"},
		"benchmarking":     {addrs: []string{"198.18.0.1", "198.19.255.254"}, want: "benchmarking"},
		"multicast":        {addrs: []string{"224.0.0.1", "239.255.255.250", "ff02::1", "ff0e::1"}, want: "multicast"},
		"reserved":         {addrs: []string{"240.0.0.1", "254.1.2.3"}, want: "reserved"},
		"broadcast":        {addrs: []string{"255.255.255.255"}, want: "limited broadcast"},
		"unspecified":      {addrs: []string{"::"}, want: "unspecified"},
		"unique-local":     {addrs: []string{"fc00::1", "fd12:3456::1"}, want: "unique-local"},
		"discard-only":     {addrs: []string{"100::1"}, want: "discard-only"},
		"segment routing":  {addrs: []string{"5f00::1"}, want: "segment routing"},
		"local-use NAT64":  {addrs: []string{"64:ff9b:1::808:808"}, want: "local-use IPv4/IPv6 translation"},
		"not global":       {addrs: []string{"::2", "::7f00:1", "::ffff:0:7f00:1", "4000::1", "e000::1"}, want: "outside IPv6 global unicast"},
		"IPv4-mapped":      {addrs: []string{"::ffff:127.0.0.1", "::ffff:10.0.0.1", "::ffff:169.254.169.254"}, want: "IPv4-mapped, carrying"},
		"NAT64 of private": {addrs: []string{"64:ff9b::7f00:1", "64:ff9b::a00:1", "64:ff9b::a9fe:a9fe"}, want: "NAT64, carrying"},
		"6to4 of private":  {addrs: []string{"2002:7f00:1::1", "2002:a00:1::", "2002:c0a8:101::1"}, want: "6to4, carrying"},
		"the server's own": {addrs: []string{"93.184.215.14", "::ffff:93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c"},
			want: "an address of this server"},
		"the server's own, translated": {addrs: []string{"64:ff9b::5db8:d70e", "2002:5db8:d70e::1"}, want: "carrying 93.184.215.14, an address of this server"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			for _, a := range tc.addrs {
				err := checkDestination(netip.MustParseAddr(a), own)
				switch {
				case tc.want == "" && err != nil:
					t.Errorf("checkDestination(%s) = %v, want it allowed", a, err)
				case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
					t.Errorf("checkDestination(%s) = %v, want a refusal saying %q", a, err, tc.want)
				}
			}
		})
	}
}

// TestCheckDestinationFailsClosed: when the server cannot list its own
// addresses it cannot tell whether an address is its own, so it refuses.
func TestCheckDestinationFailsClosed(t *testing.T) {
	broken := func() ([]netip.Addr, error) { return nil, errors.New("no netlink") }
	if err := checkDestination(netip.MustParseAddr("8.8.8.8"), broken); err == nil || !strings.Contains(err.Error(), "no netlink") {
		t.Fatalf("checkDestination with no address list = %v, want a refusal naming the cause", err)
	}
}

// TestCheckDestinationReadsInterfacesNow: the server's own addresses are
// those of its interfaces at the time of the check, whatever range they
// are in.
func TestCheckDestinationReadsInterfacesNow(t *testing.T) {
	addrs, err := interfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if err := checkDestination(a, interfaceAddrs); err == nil {
			t.Errorf("checkDestination(%s), an address of this host: allowed", a)
		}
	}
	var calls int
	counting := func() ([]netip.Addr, error) { calls++; return nil, nil }
	checkDestination(netip.MustParseAddr("8.8.8.8"), counting)
	checkDestination(netip.MustParseAddr("8.8.8.8"), counting)
	if calls != 2 {
		t.Errorf("two checks read the addresses %d times, want each time", calls)
	}
}

// TestWebhookPrivateURLsRefused: by default a webhook may not name this
// machine or a private, loopback or link-local address; the operator's
// AllowPrivateWebhooks lets it.
func TestWebhookPrivateURLsRefused(t *testing.T) {
	e := newHookEnvWith(t, false)
	for _, url := range []string{
		"http://127.0.0.1:8080/h", "http://localhost/h", "http://LOCALHOST./h", "http://api.localhost:9000/h",
		"http://[::1]/h", "http://169.254.169.254/latest/meta-data", "https://10.0.0.7:9000/in",
		"http://[::ffff:192.168.0.1]/h", "http://0.0.0.0/h",
	} {
		_, err := e.svc.CreateWebhook(t.Context(), "t1", url, []string{"*"})
		if err == nil || !strings.Contains(err.Error(), "--webhook-allow-private") {
			t.Errorf("CreateWebhook(%s): %v, want refused with the flag named", url, err)
		}
	}
	for _, url := range []string{"https://example.com/h", "http://8.8.8.8/h", "https://[2606:4700::1111]/h"} {
		if _, err := e.svc.CreateWebhook(t.Context(), "t1", url, []string{"*"}); err != nil {
			t.Errorf("CreateWebhook(%s): %v", url, err)
		}
	}
	allowed := newHookEnvWith(t, true)
	if _, err := allowed.svc.CreateWebhook(t.Context(), "t1", "http://127.0.0.1:8080/h", []string{"*"}); err != nil {
		t.Errorf("CreateWebhook on loopback with private webhooks allowed: %v", err)
	}
}

// TestWebhookDeliveryRefusesPrivateAddress: a webhook whose URL reaches a
// private address anyway (a name that resolves to one, or a webhook made
// while they were allowed) gets no connection: each attempt fails without
// the receiver hearing of it.
func TestWebhookDeliveryRefusesPrivateAddress(t *testing.T) {
	e := newHookEnvWith(t, false)
	r := newReceiver(t, always(204))
	w := core.Webhook{ID: "wh-inside", Team: "t1", URL: r.URL, Events: []string{"*"}, Secret: "whsec_x", CreatedAt: hookT0}
	if err := e.st.CreateWebhook(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	e.run(fastRetries)
	e.emit("t1", "block.active")
	e.waitLog(w.ID, []string{"evt-1 0 0", "evt-1 1 0", "evt-1 2 0", "evt-1 3 0 done"})
	if got, _ := r.requests(); len(got) != 0 {
		t.Errorf("the private receiver got %v", got)
	}
	ds, err := e.svc.Deliveries(t.Context(), "t1", w.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ds[1].Error, "not a public address") {
		t.Errorf("attempt error %q, want it to say the address is not public", ds[1].Error)
	}
}
