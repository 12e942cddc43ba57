package tfprovider

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"

	"capblock/internal/client"
)

// clientToken derives the idempotency key of one purchase from the
// resource's arguments and the quote it buys: every retry of that
// purchase sends the same key, so a lost answer never buys twice, and two
// resources of the same arguments (count, for_each) buy their own quotes
// under keys of their own.
func clientToken(kind string, parts ...string) string {
	h := sha256.Sum256([]byte(kind + "\x00" + strings.Join(parts, "\x00")))
	return "terraform-" + hex.EncodeToString(h[:])[:40]
}

// purchaseAttempts bounds how often a purchase is sent when no answer
// came back; the client token makes each retry replay the first.
const purchaseAttempts = 3

// withRetries calls buy until it gets an answer from the server (an
// error the server gave is an answer), at most purchaseAttempts times.
func withRetries[T any](ctx context.Context, buy func() (T, error)) (T, error) {
	var v T
	var err error
	for range purchaseAttempts {
		v, err = buy()
		var p *client.Problem
		if err == nil || errors.As(err, &p) || ctx.Err() != nil {
			return v, err
		}
	}
	return v, err
}

// liveBlockState tells whether a block in state s still holds (or will
// hold) capacity, so that cancelling it means something.
func liveBlockState(s string) bool {
	switch s {
	case "payment-pending", "scheduled", "active":
		return true
	}
	return false
}

// describeSearch says what was searched, for a "nothing fits" error.
func describeSearch(typ string, count, hours int64, window string) string {
	return fmt.Sprintf("%d × %s for %dh %s", count, typ, hours, window)
}

// cancelWhileLive is a destroy that gives capacity back: it cancels what
// (a block or a plan, id) unless its state, read now, is no longer live
// (ended, cancelled or failed: nothing to give back), and takes one that
// ended between the read and the cancel as destroyed.
func cancelWhileLive(ctx context.Context, diags *diag.Diagnostics, what, id string, live func(string) bool,
	state func(context.Context) (string, error), cancel func(context.Context) error) {
	s, err := state(ctx)
	if isNotFound(err) {
		return
	}
	if err != nil {
		diags.AddError("Reading "+what+" "+id, err.Error())
		return
	}
	if !live(s) {
		return
	}
	err = cancel(ctx)
	if isInvalidState(err) {
		if s, rerr := state(ctx); rerr == nil && !live(s) {
			return
		}
	}
	if err != nil {
		diags.AddError("Cancelling "+what+" "+id, err.Error())
	}
}
