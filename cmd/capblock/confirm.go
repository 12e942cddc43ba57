package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"golang.org/x/term"

	"capblock/internal/client"
	"capblock/internal/fleet"
)

// isTerminal reports whether f is a terminal: a person who can answer a
// question, rather than a pipe or a file.
func isTerminal(f *os.File) bool {
	// Not the file's mode: /dev/null is a character device too, and a
	// script run with </dev/null has no one to answer.
	return term.IsTerminal(int(f.Fd()))
}

// mayAsk checks, before anything is asked of the server, that a command
// that spends or refunds money can be confirmed: --yes, or a person at a
// terminal to answer. Run without either (a script, a pipe), it refuses
// in one line rather than wait for an answer that never comes.
func (a *app) mayAsk(yes bool, verb string) error {
	if yes || (a.interactive != nil && a.interactive()) {
		return nil
	}
	return usagef("%s asks for confirmation, and there is no terminal to answer: pass --yes to %s without asking", verb, verb)
}

// confirm prints what is about to happen on stderr and asks whether to go
// on; with yes it only prints it. Only "y" or "yes" goes on; anything
// else is the error declined.
func (a *app) confirm(yes bool, what, question, declined string) error {
	a.note("%s", what)
	if yes {
		return nil
	}
	fmt.Fprintf(a.stderr, "%s [y/N] ", question)
	line, err := bufio.NewReader(a.stdin).ReadString('\n')
	if err != nil && line == "" {
		fmt.Fprintln(a.stderr)
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return nil
	}
	return errors.New(declined)
}

// money reads an API amount; ok is false when it cannot be read.
func money(m client.Money) (minor int64, ok bool) {
	v, err := fleet.ParseMoney(m.Amount, m.Currency)
	if err != nil {
		return 0, false
	}
	return v.Minor, true
}

// formatMinor writes minor units of currency as the API does: "12.50 USD".
func formatMinor(minor int64, currency string) string {
	sign := ""
	if minor < 0 {
		sign, minor = "-", -minor
	}
	return client.Money{Amount: fmt.Sprintf("%s%d.%02d", sign, minor/100, minor%100), Currency: currency}.String()
}

// feeChange is how much a block's fee grew from before to after: what an
// extension charged.
func feeChange(before, after client.Money) string {
	b, ok1 := money(before)
	f, ok2 := money(after)
	if !ok1 || !ok2 || before.Currency != after.Currency {
		return "-"
	}
	return formatMinor(f-b, after.Currency)
}

// refundPreview says what cancelling b at now refunds: the server's quote
// (GET /v1/blocks/{id}/cancel-quote), explained by the operator's policy p.
func refundPreview(b client.Block, now time.Time, p client.Policy, refund client.Money) string {
	if now.Before(b.StartTime) {
		return fmt.Sprintf("it has not started: refund %s (%d%% of the fee before the start, the operator's policy)", refund, p.RefundBeforeStartPercent)
	}
	if minor, ok := money(refund); ok && minor == 0 {
		return fmt.Sprintf("it started at %s: no refund, an early release (the operator's policy refunds %d%% after the start)",
			fmtZoned(b.StartTime), p.RefundAfterStartPercent)
	}
	return fmt.Sprintf("it started at %s: an early release, refund %s (%d%% of the fee after the start, the operator's policy)",
		fmtZoned(b.StartTime), refund, p.RefundAfterStartPercent)
}

// blockLabel names a block for a sentence: its id, and its name if any.
func blockLabel(b client.Block) string {
	if b.Name == "" {
		return b.ID
	}
	return fmt.Sprintf("%s (%s)", b.ID, b.Name)
}

// refunded returns what the team's ledger refunded for block id (0 when
// nothing), and whether the ledger could be read.
func refunded(ctx context.Context, c *client.Client, team, id, currency string) (minor int64, formatted string, ok bool) {
	l, err := c.Ledger(ctx, team)
	if err != nil {
		return 0, "", false
	}
	var total int64
	for _, e := range l.Entries {
		if e.Kind != "refund" || e.Subject != id {
			continue
		}
		m, ok := money(e.Amount)
		if !ok {
			return 0, "", false
		}
		total += m
		currency = e.Amount.Currency
	}
	return total, formatMinor(total, currency), true
}
