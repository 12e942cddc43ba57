package store

import (
	"encoding/json"
	"fmt"
	"time"

	"capblock/internal/core"
)

// This file holds what both drivers do the same way: the stored JSON of
// placements, tags and event data, the checks a change must pass before
// any SQL runs, and the budget guard's verdict.

// placementJSON is the stored form of a core.Placement; its own field names
// keep the schema independent of the Go names in core.
type placementJSON struct {
	Node string `json:"node"`
	GPUs []int  `json:"gpus"`
}

// EncodePlacements is the stored JSON of a block's placements.
func EncodePlacements(ps []core.Placement) string {
	if ps == nil {
		return "null"
	}
	out := make([]placementJSON, len(ps))
	for i, p := range ps {
		out[i] = placementJSON{Node: p.Node, GPUs: p.GPUs}
	}
	b, _ := json.Marshal(out) // strings and ints always marshal
	return string(b)
}

// DecodePlacements reads what EncodePlacements stored. The text as
// EncodePlacements writes it is read by decodeCanonicalPlacements, about
// four times faster than encoding/json (a restart reads every live
// block's); any other text, JSON written otherwise or not JSON at all,
// goes through encoding/json, which gives the same placements or the
// error.
func DecodePlacements(text string) ([]core.Placement, error) {
	if ps, ok := decodeCanonicalPlacements(text); ok {
		return ps, nil
	}
	ps, err := decodePlacementsJSON(text)
	if err != nil {
		return nil, fmt.Errorf("decoding placements: %w", err)
	}
	return ps, nil
}

// decodePlacementsJSON reads placements with encoding/json.
func decodePlacementsJSON(text string) ([]core.Placement, error) {
	var in []placementJSON
	if err := json.Unmarshal([]byte(text), &in); err != nil {
		return nil, err
	}
	if in == nil {
		return nil, nil
	}
	out := make([]core.Placement, len(in))
	for i, p := range in {
		out[i] = core.Placement{Node: p.Node, GPUs: p.GPUs}
	}
	return out, nil
}

// EncodeTags is the stored JSON of a block's tags.
func EncodeTags(tags map[string]string) string {
	b, _ := json.Marshal(tags) // a map of strings always marshals
	return string(b)
}

// DecodeTags reads what EncodeTags stored.
func DecodeTags(text string) (map[string]string, error) {
	switch text { // most blocks have none: no need to run the decoder
	case "{}":
		return map[string]string{}, nil
	case "null":
		return nil, nil
	}
	var tags map[string]string
	if err := json.Unmarshal([]byte(text), &tags); err != nil {
		return nil, fmt.Errorf("decoding tags: %w", err)
	}
	return tags, nil
}

// EncodeEvents marshals the events' data, before a transaction starts; it
// reads back as JSON decodes into map[string]any (numbers as float64).
func EncodeEvents(events []core.Event) ([]string, error) {
	out := make([]string, len(events))
	for i, e := range events {
		b, err := json.Marshal(e.Data)
		if err != nil {
			return nil, fmt.Errorf("event %s: %w", e.ID, core.Invalidf("event data is not JSON: %v", err))
		}
		out[i] = string(b)
	}
	return out, nil
}

// DecodeEventData reads an event's stored data.
func DecodeEventData(text string) (map[string]any, error) {
	var data map[string]any
	if err := json.Unmarshal([]byte(text), &data); err != nil {
		return nil, fmt.Errorf("decoding event data: %w", err)
	}
	return data, nil
}

// ValidateChange rejects a change that no stored state could accept: a
// block without an id, in an unknown state, ending before it starts, or
// holding a GPU twice or a negative GPU index; an action or a node health
// record that is not well formed. The error wraps
// core.ErrInvalidArgument.
func ValidateChange(c Change) error {
	for _, b := range c.Insert {
		if err := validateBlock(b, true); err != nil {
			return err
		}
	}
	for _, u := range c.Update {
		if err := validateBlock(u.Block, u.Replace); err != nil {
			return err
		}
	}
	if err := validateActions(c.Actions); err != nil {
		return err
	}
	for _, h := range c.Handovers {
		if err := ValidateHandover(h); err != nil {
			return err
		}
	}
	for _, j := range c.Journals {
		if err := j.Check(); err != nil {
			return err
		}
	}
	return validateNodeHealth(c.NodeHealth)
}

func validateBlock(b core.Block, checkPlacements bool) error {
	switch {
	case b.ID == "":
		return core.Invalidf("a block needs an id")
	case !b.State.Valid():
		return fmt.Errorf("block %s: %w", b.ID, core.Invalidf("unknown state %q", b.State))
	case !b.End.After(b.Start):
		return fmt.Errorf("block %s: %w", b.ID, core.Invalidf("end %s is not after start %s", b.End, b.Start))
	}
	if !checkPlacements {
		return nil
	}
	type gpu struct {
		node string
		idx  int
	}
	seen := map[gpu]bool{}
	for _, p := range b.Placements {
		for _, g := range p.GPUs {
			if g < 0 {
				return fmt.Errorf("block %s: %w", b.ID, core.Invalidf("negative GPU index %d on node %s", g, p.Node))
			}
			if seen[gpu{p.Node, g}] {
				return fmt.Errorf("block %s: %w", b.ID, core.Invalidf("GPU %d of node %s placed twice", g, p.Node))
			}
			seen[gpu{p.Node, g}] = true
		}
	}
	return nil
}

// CheckBudget is the budget guard's verdict: an error wrapping
// core.ErrBudgetExceeded when spent (the team's stored spending since
// g.Since, as budgetSpendSQL sums it), with the change's own journals'
// spending of the team, exceeds g.Limit. Drivers read spent inside the
// commit's transaction.
func CheckBudget(g core.BudgetGuard, spent int64, journals []core.Journal) error {
	total := spent
	for _, j := range journals {
		for _, p := range j.Postings {
			if p.Account == core.WalletAccount(g.Team) {
				total += p.Spending(g.Credits)
			}
		}
	}
	if total <= g.Limit.Minor {
		return nil
	}
	since := ""
	if !g.Since.IsZero() {
		since = " since " + g.Since.UTC().Format(time.RFC3339)
	}
	cur := g.Limit.Currency
	return fmt.Errorf("%w: team %s would have spent %s of %s %s%s (%s before this change)",
		core.ErrBudgetExceeded, g.Team,
		core.Money{Minor: total, Currency: cur}, g.Limit, cur, since,
		core.Money{Minor: spent, Currency: cur})
}

// AddPosting appends p to the journals read so far: to the last one when
// it is j, else as a new journal. Reads list postings in journal order.
func AddPosting(js []core.Journal, j core.Journal, p core.Posting) []core.Journal {
	if n := len(js); n > 0 && js[n-1].ID == j.ID {
		js[n-1].Postings = append(js[n-1].Postings, p)
		return js
	}
	j.Postings = []core.Posting{p}
	return append(js, j)
}

// LedgerOf is the lines of team's wallet in journals (of every wallet
// when team is "").
func LedgerOf(js []core.Journal, team string) []core.LedgerEntry {
	var out []core.LedgerEntry
	for _, j := range js {
		for _, e := range j.Entries() {
			if team == "" || e.Team == team {
				out = append(out, e)
			}
		}
	}
	return out
}
