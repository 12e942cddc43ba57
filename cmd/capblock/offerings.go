package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"capblock/internal/client"
	"capblock/internal/humantime"
)

// defaultStartWindow is how far after --start-after a block may start when
// --end-before is not given.
const defaultStartWindow = 14 * 24 * time.Hour

func (a *app) offeringsCmd() *cobra.Command {
	var (
		types                              []string
		count, maxResults                  int
		duration, minDuration, maxDuration string
		startAfter, endBefore, zone, team  string
	)
	cmd := &cobra.Command{
		Use:   "offerings --type TYPE --count N --duration D [flags]",
		Short: "Search priced offerings for a capacity block",
		Long: `Search priced offerings: COUNT instances of TYPE for DURATION, starting after
--start-after and ending before --end-before. The best come first; buy one
before it expires with "capblock buy ROW", the row's number in the table
(the search is remembered beside the login), or "capblock buy OFFERING_ID".

Durations are whole hours (capacity is sold by the hour): 48h, 3d, 2w, 1d12h.
Dates: now, today, tomorrow (midnight UTC), +14d, +6h, 2026-12-01, RFC 3339.
Relative dates are read from the server's clock (its simulated clock on a
server run with --sim-clock), not from this machine's.`,
		Example: `  capblock offerings --type h100.8x --count 2 --duration 48h --start-after tomorrow --end-before +14d
  capblock offerings --type l4.1x --type l4.4x --min-duration 4h --max-duration 8h --zone zone-a`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			q := client.OfferingsQuery{InstanceTypes: types, InstanceCount: count, Zone: zone, MaxResults: maxResults, Team: team}
			var err error
			switch {
			case duration != "" && (minDuration != "" || maxDuration != ""):
				return usagef("give --duration or --min-duration/--max-duration, not both")
			case duration != "":
				if q.DurationHours, err = parseHours("--duration", duration); err != nil {
					return err
				}
			case minDuration == "" && maxDuration == "":
				return usagef("give --duration (e.g. 48h) or a range with --min-duration and --max-duration")
			}
			if minDuration != "" {
				if q.MinDurationHours, err = parseHours("--min-duration", minDuration); err != nil {
					return err
				}
			}
			if maxDuration != "" {
				if q.MaxDurationHours, err = parseHours("--max-duration", maxDuration); err != nil {
					return err
				}
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			if q.Team, err = teamFlag(cmd.Context(), c, q.Team); err != nil {
				return err
			}
			if q.InstanceTypes, err = capblockTypes(cmd.Context(), c, q.InstanceTypes); err != nil {
				return err
			}
			if err := a.parseDates(cmd.Context(), c,
				dateFlag{"--start-after", startAfter, &q.StartAfter},
				dateFlag{"--end-before", endBefore, &q.EndBefore}); err != nil {
				return err
			}
			if endBefore == "" {
				// Any start within defaultStartWindow, for the longest length asked.
				longest := max(q.DurationHours, q.MaxDurationHours, q.MinDurationHours)
				q.EndBefore = q.StartAfter.Add(defaultStartWindow + time.Duration(longest)*time.Hour)
			}
			offerings, err := c.Offerings(cmd.Context(), q)
			if err != nil {
				return err
			}
			ids := make([]string, len(offerings))
			var expires time.Time
			for i, o := range offerings {
				ids[i] = o.OfferingID
				if expires.IsZero() || o.ExpiresAt.Before(expires) {
					expires = o.ExpiresAt
				}
			}
			a.rememberSearch(blockSearch, ids, expires)
			if a.jsonOutput() {
				return a.printJSON(map[string]any{"offerings": offerings})
			}
			if len(offerings) == 0 {
				a.note("no offering fits: try a wider window (--start-after/--end-before), a smaller --count, another --zone or a shorter --duration")
				return nil
			}
			if err := a.printOfferings(offerings); err != nil {
				return err
			}
			a.note("buy one with: capblock buy ROW, e.g. capblock buy 1 (quotes expire at %s)", fmtZoned(expires))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&types, "type", nil, "instance type, e.g. h100.8x, or its AWS name, e.g. p5.48xlarge (repeat or comma-separate for several)")
	f.IntVar(&count, "count", 1, "number of instances")
	f.StringVar(&duration, "duration", "", "block length, e.g. 48h or 3d")
	f.StringVar(&minDuration, "min-duration", "", "shortest acceptable length (instead of --duration)")
	f.StringVar(&maxDuration, "max-duration", "", "longest acceptable length (instead of --duration)")
	f.StringVar(&startAfter, "start-after", "now", "earliest start, e.g. tomorrow, +6h or 2026-12-01")
	f.StringVar(&endBefore, "end-before", "", "latest end, e.g. +14d (default: any start within 14 days of --start-after)")
	f.StringVar(&zone, "zone", "", "only this zone (default: all zones)")
	f.StringVar(&team, "team", "", "quote for this team, within its quota (an admin's choice, its id or name; default: your own team)")
	f.IntVar(&maxResults, "max-results", 0, "at most this many offerings (default: the server's, 6)")
	_ = cmd.MarkFlagRequired("type")
	return cmd
}

func (a *app) buyCmd() *cobra.Command {
	var (
		name, clientToken, team string
		tags                    []string
	)
	cmd := &cobra.Command{
		Use:   "buy (ROW | OFFERING_ID)",
		Short: "Buy an offering, making it a capacity block",
		Long: `Buy an offering found with "capblock offerings": ROW is its row number in the
last search's table (the search is remembered beside the login, for the
server it was made on), OFFERING_ID its id. A quote buys one block: the
purchase carries a client token made from the offering id (unless
--client-token is given), so buying the same quote again shows the block it
bought instead of buying twice.`,
		Example: `  capblock buy 1 --name load-test
  capblock buy cbo-… --name load-test --tag team=search --tag env=staging`,
		Args: exactlyOne("row number or offering id (from 'capblock offerings')"),
		RunE: func(cmd *cobra.Command, args []string) error {
			tagMap, err := parseTags(tags)
			if err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			if team, err = teamFlag(cmd.Context(), c, team); err != nil {
				return err
			}
			id, row, err := a.offeringArg(blockSearch, args[0], a.creds.url)
			if err != nil {
				return err
			}
			ownToken := clientToken == ""
			if ownToken {
				clientToken = quoteToken(id)
			}
			b, created, err := c.Purchase(cmd.Context(), client.BuyRequest{OfferingID: id, ClientToken: clientToken, Name: name, Tags: tagMap, Team: team})
			if err != nil {
				return rowError(row, boughtBefore(blockThing, err, ownToken))
			}
			if !created {
				a.note("this quote already bought block %s on %s; nothing was charged again (see it with 'capblock blocks show %s')", b.ID, fmtZoned(b.CreatedAt), b.ID)
			}
			if a.jsonOutput() {
				return a.printJSON(struct {
					client.Block
					ClientToken string `json:"clientToken"`
				}{b, clientToken})
			}
			if err := a.printBlock(b); err != nil {
				return err
			}
			a.note("client token: %s (to retry this purchase safely, pass --client-token %s)", clientToken, clientToken)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&name, "name", "", "a name for the block")
	f.StringArrayVar(&tags, "tag", nil, "a tag KEY=VALUE (repeat for several)")
	f.StringVar(&clientToken, "client-token", "", "idempotency token (default: one made from the offering id)")
	f.StringVar(&team, "team", "", "buy for this team (an admin's choice; default: your own team)")
	return cmd
}

// parseHours parses a duration flag into whole hours. Its errors give
// examples in whole hours only: humantime's own ("90m") would suggest a
// length that is refused.
func parseHours(flag, s string) (int, error) {
	d, err := humantime.ParseDuration(s)
	if err != nil {
		return 0, usagef("%s %q is not a duration; write it in whole hours, like 48h, 3d, 2w or 1d12h", flag, s)
	}
	if d <= 0 || d%time.Hour != 0 {
		return 0, usagef("%s %s is not a whole number of hours; capacity is sold by the hour (e.g. 1h, 48h, 3d)", flag, s)
	}
	return int(d / time.Hour), nil
}

// parseTags turns KEY=VALUE flags into a map.
func parseTags(tags []string) (map[string]string, error) {
	if len(tags) == 0 {
		return nil, nil
	}
	m := make(map[string]string, len(tags))
	for _, t := range tags {
		k, v, ok := strings.Cut(t, "=")
		if !ok || k == "" {
			return nil, usagef("--tag %q: write it as KEY=VALUE", t)
		}
		if _, dup := m[k]; dup {
			return nil, usagef("--tag %q: key %q given twice", t, k)
		}
		m[k] = v
	}
	return m, nil
}

// quoteToken is the client token of a purchase of a quote when none is
// given: the same for every purchase of that quote, so that buying it
// again (a second run of the same command, a retry after a lost answer)
// returns what the first purchase bought instead of buying twice.
func quoteToken(offeringID string) string {
	sum := sha256.Sum256([]byte(offeringID))
	return "cli-" + hex.EncodeToString(sum[:12])
}

// boughtIDs finds the block or plan ids in a server's message.
var boughtIDs = regexp.MustCompile(`\b(cb|tp)-[0-9a-z]+\b`)

// boughtBefore explains the refusal of a purchase made with quoteToken's
// token when that token already bought something under other terms
// (another --name, --tag or --team): the quote bought it already.
func boughtBefore(kind thingKind, err error, ownToken bool) error {
	if !ownToken || client.ProblemCode(err) != client.CodeIdempotencyMismatch {
		return err
	}
	id := boughtIDs.FindString(err.Error())
	if id == "" {
		return &boughtError{fmt.Sprintf("this quote already bought a %s, with another --name, --tag or --team: '%s' lists them; or search again for a new quote", kind.noun, kind.list), err}
	}
	return &boughtError{fmt.Sprintf("this quote already bought %s %s, with another --name, --tag or --team: see it with 'capblock %ss show %s', or search again for a new quote", kind.noun, id, kind.noun, id), err}
}

// boughtError is a refusal said in the CLI's words; it keeps the server's
// problem for its code.
type boughtError struct {
	msg string
	err error
}

func (e *boughtError) Error() string { return e.msg }
func (e *boughtError) Unwrap() error { return e.err }
