package service

import (
	"net/netip"
	"strings"
	"testing"

	"capblock/internal/core"
)

func TestPublicAddr(t *testing.T) {
	for addr, want := range map[string]bool{
		"8.8.8.8": true, "1.1.1.1": true, "203.0.114.7": true, "2606:4700::1111": true,
		"127.0.0.1": false, "127.8.9.10": false, "10.1.2.3": false, "172.16.0.1": false, "192.168.1.1": false,
		"169.254.169.254": false, "100.64.0.1": false, "0.0.0.0": false, "0.1.2.3": false, "198.18.0.1": false,
		"224.0.0.1": false, "255.255.255.255": false, "::1": false, "::": false, "fe80::1": false, "fc00::1": false,
		"fd12:3456::1": false, "ff02::1": false, "::ffff:127.0.0.1": false, "::ffff:10.0.0.1": false, "64:ff9b::7f00:1": false,
	} {
		if got := publicAddr(netip.MustParseAddr(addr)); got != want {
			t.Errorf("publicAddr(%s) = %v, want %v", addr, got, want)
		}
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
