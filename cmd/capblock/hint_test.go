package main

import (
	"fmt"
	"testing"

	"github.com/spf13/cobra"

	"capblock/internal/client"
)

// TestHintOfExpiredQuote: the hint after an expired quote names the
// command to search with, and says "search again" once, whether or not
// the server said it already.
func TestHintOfExpiredQuote(t *testing.T) {
	root := &cobra.Command{Use: "capblock"}
	buy := &cobra.Command{Use: "buy"}
	plans := &cobra.Command{Use: "plans"}
	plansBuy := &cobra.Command{Use: "buy"}
	root.AddCommand(buy, plans)
	plans.AddCommand(plansBuy)
	for _, tc := range []struct {
		name   string
		cmd    *cobra.Command
		detail string
		want   string
	}{
		{"the server says to search again", buy, "the quote expired at 2026-11-20T10:10:00Z; search again for a fresh quote",
			"capblock: offering_expired: the quote expired at 2026-11-20T10:10:00Z; search again for a fresh quote with 'capblock offerings'"},
		{"the server says only that it expired", buy, "the quote expired at 2026-11-20T10:10:00Z",
			"capblock: offering_expired: the quote expired at 2026-11-20T10:10:00Z; search again for a fresh quote with 'capblock offerings'"},
		{"a plan's quote", plansBuy, "the quote expired at 2026-11-20T10:10:00Z; search again for a fresh quote",
			"capblock: offering_expired: the quote expired at 2026-11-20T10:10:00Z; search again for a fresh quote with 'capblock plans offerings'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := fmt.Errorf("%w", &client.Problem{Status: 410, Code: client.CodeOfferingExpired, Detail: tc.detail})
			if got := "capblock: " + err.Error() + hint(tc.cmd, err); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}
