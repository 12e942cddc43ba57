package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"capblock/internal/client"
	"capblock/internal/core"
	"capblock/internal/fleet"
	"capblock/internal/humantime"
)

// timeLayout is how tables and messages show times, in displayZone;
// headers and messages name the zone (zoneLabel).
const timeLayout = "2006-01-02 15:04"

// displayZone is the zone times are shown in: UTC, or this machine's with
// --local-time. It is the process's, not the app's, so that every table
// shows one zone; execute sets it for each command line.
var displayZone = time.UTC

// zoneLabel names displayZone for headers and messages: "UTC", or the
// local zone's abbreviation (CET, or +0530 where it has none).
func zoneLabel() string {
	if displayZone == time.UTC {
		return "UTC"
	}
	return time.Now().In(displayZone).Format("MST")
}

// fmtZoned is fmtTime with the zone named: "2026-12-01 00:00 UTC".
func fmtZoned(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return fmtTime(t) + " " + zoneLabel()
}

// printLine writes one line of text on stdout, escaped by printable: its
// arguments may come from the server.
func (a *app) printLine(format string, args ...any) {
	fmt.Fprintln(a.stdout, printable(fmt.Sprintf(format, args...)))
}

// note writes a hint for people on stderr, keeping stdout for data. It is
// escaped by printable: its arguments may come from the server.
func (a *app) note(format string, args ...any) {
	fmt.Fprintln(a.stderr, printable(fmt.Sprintf(format, args...)))
}

// maxTableWidth is how many columns a table fits in, but with -o wide:
// the narrowest terminal a table is read on.
const maxTableWidth = 120

// table writes aligned columns; call flush when done. Each cell is
// escaped by printable, which also keeps a tab or a newline in a name
// from breaking the columns. A table made by app.newTable fits
// maxTableWidth: the columns named in clipToFit give way, the widest
// first, each cut with an ellipsis (…); -o wide and -o json show every
// value whole.
type table struct {
	w     *tabwriter.Writer
	width int // the widest a line may be; 0: as wide as its cells
	// clippable are the columns that give way, by index.
	clippable map[int]bool
	// noHeaders leaves the header line out (--no-headers); it still
	// bounds how far a column is cut.
	noHeaders bool
	rows      [][]string
}

func newTable(out io.Writer, headers ...string) *table {
	t := &table{w: tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)}
	if displayZone != time.UTC {
		headers = slices.Clone(headers)
		for i, h := range headers {
			headers[i] = strings.Replace(h, "(UTC)", "("+zoneLabel()+")", 1)
		}
	}
	t.row(headers...)
	return t
}

// newTable is a table on stdout that fits maxTableWidth unless -o wide,
// with its header line unless --no-headers.
func (a *app) newTable(headers ...string) *table {
	t := newTable(a.stdout, headers...)
	if !a.wideOutput() {
		t.width = maxTableWidth
	}
	t.noHeaders = a.noHeaders
	return t
}

// clipToFit names, by header, the columns cut when a line would be wider
// than the table may be: free text such as names and URLs, never ids,
// times or amounts.
func (t *table) clipToFit(headers ...string) *table {
	if t.clippable == nil {
		t.clippable = map[int]bool{}
	}
	for i, h := range t.rows[0] {
		if slices.Contains(headers, h) {
			t.clippable[i] = true
		}
	}
	return t
}

func (t *table) row(cells ...string) {
	escaped := make([]string, len(cells))
	for i, c := range cells {
		escaped[i] = printable(c)
	}
	t.rows = append(t.rows, escaped)
}

func (t *table) flush() error {
	t.fit()
	rows := t.rows
	if t.noHeaders && len(rows) > 0 {
		rows = rows[1:]
	}
	for _, r := range rows {
		fmt.Fprintln(t.w, strings.Join(r, "\t"))
	}
	t.rows = nil
	if err := t.w.Flush(); err != nil {
		return fmt.Errorf("writing table: %w", err)
	}
	return nil
}

// minClipped is the fewest characters a clipped cell keeps: two and the
// ellipsis, or its header's width when wider.
const minClipped = 3

// fit cuts the clippable columns until the widest line fits t.width: one
// character at a time from the widest of them, down to its header's
// width. Widths are counted in runes, as tabwriter counts them.
func (t *table) fit() {
	if t.width == 0 || len(t.clippable) == 0 || len(t.rows) == 0 {
		return
	}
	var widths []int
	for _, r := range t.rows {
		for i, c := range r {
			if i >= len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	// A line is each cell padded to its column's width and two spaces,
	// but the last cell, which is not padded.
	line := 2 * (len(widths) - 1)
	for _, w := range widths {
		line += w
	}
	floor := make([]int, len(widths))
	for i, h := range t.rows[0] {
		floor[i] = max(minClipped, utf8.RuneCountInString(h))
	}
	for line > t.width {
		widest := -1
		for i := range widths {
			if t.clippable[i] && widths[i] > floor[i] && (widest < 0 || widths[i] >= widths[widest]) {
				widest = i
			}
		}
		if widest < 0 {
			break // nothing left to cut: the fixed columns alone are wider
		}
		widths[widest]--
		line--
	}
	for _, r := range t.rows {
		for i, c := range r {
			if t.clippable[i] {
				r[i] = clip(c, widths[i])
			}
		}
	}
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.In(displayZone).Format(timeLayout)
}

// savings is how much less than on-demand a fee is, in whole percent.
func savings(fee, onDemand client.Money) string {
	f, err1 := fleet.ParseMoney(fee.Amount, fee.Currency)
	od, err2 := fleet.ParseMoney(onDemand.Amount, onDemand.Currency)
	if err1 != nil || err2 != nil || od.Minor <= 0 || f.Currency != od.Currency {
		return "-"
	}
	diff := od.Minor - f.Minor
	pct := (diff*100 + od.Minor/2) / od.Minor
	if diff < 0 {
		pct = -((-diff*100 + od.Minor/2) / od.Minor)
	}
	return strconv.FormatInt(pct, 10) + "%"
}

// printOfferings writes offerings best first, the full id last so it can
// be copied. ALT marks an offering of another duration than the one asked
// for ("yes"); the server lists those after the others.
func (a *app) printOfferings(offerings []client.Offering) error {
	cols := []string{"#", "TYPE", "COUNT", "ZONE", "START (UTC)", "END (UTC)", "HOURS", "ALT", "FEE", "ON-DEMAND", "SAVINGS"}
	if a.wideOutput() {
		cols = append(cols, "OFFERING ID")
	}
	t := a.newTable(cols...)
	for i, o := range offerings {
		alt := "-"
		if o.Alternative {
			alt = "yes"
		}
		row := []string{strconv.Itoa(i + 1), o.InstanceType, strconv.Itoa(o.InstanceCount), o.Zone,
			fmtTime(o.StartTime), fmtTime(o.EndTime), strconv.Itoa(o.DurationHours), alt,
			o.UpfrontFee.String(), o.OnDemandFee.String(), savings(o.UpfrontFee, o.OnDemandFee)}
		if a.wideOutput() {
			row = append(row, o.OfferingID)
		}
		t.row(row...)
	}
	return t.flush()
}

// printBlock writes one block as "key: value" lines.
func (a *app) printBlock(b client.Block) error {
	t := &table{w: tabwriter.NewWriter(a.stdout, 0, 8, 1, ' ', 0)}
	t.row("id:", b.ID)
	if b.Name != "" {
		t.row("name:", b.Name)
	}
	if b.Team != "" {
		t.row("team:", b.Team)
	}
	t.row("state:", a.blockState(b))
	t.row("instances:", fmt.Sprintf("%d × %s (%s)", b.InstanceCount, b.InstanceType, b.GPUModel))
	t.row("zone:", b.Zone)
	t.row("start:", fmtZoned(b.StartTime))
	t.row("end:", fmtZoned(b.EndTime))
	t.row("hours:", strconv.Itoa(b.DurationHours))
	t.row("upfront fee:", b.UpfrontFee.String())
	t.row("created:", fmtZoned(b.CreatedAt))
	if len(b.Tags) > 0 {
		t.row("tags:", formatLabels(b.Tags))
	}
	if b.PlanID != "" {
		t.row("plan:", b.PlanID)
	}
	for _, h := range b.Handovers {
		t.row("handed on:", handoverLine(b, h))
	}
	if u := b.Utilisation; u != nil && u.Reserved > 0 {
		t.row("GPU-hours:", fmt.Sprintf("%s reserved so far, %s used, %s lent, %s idle", gpuHours(u.Reserved), gpuHours(u.Used), gpuHours(u.Lent), gpuHours(u.Idle)))
	}
	return t.flush()
}

// handoverLine tells one hand-over of block b: given or received.
func handoverLine(b client.Block, h client.Handover) string {
	switch {
	case h.Kind == "release":
		return fmt.Sprintf("released for resale from %s: %d of %d GPU-hours resold, %s credited (%d%% resale fee)",
			fmtZoned(h.From), h.ResoldGPUHours, h.GPUHours, h.Credited, h.ResaleFeePercent)
	case h.ToBlockID == b.ID:
		return fmt.Sprintf("received from team %s from %s, for %s", h.Team, fmtZoned(h.From), h.Price)
	default:
		return fmt.Sprintf("transferred to team %s from %s (block %s), for %s", h.ToTeam, fmtZoned(h.From), h.ToBlockID, h.Price)
	}
}

// blockState is a block's state for people: a payment-pending block says
// what it waits for, and until when (the operator's approval deadline,
// read from the policy; the default one when it cannot be read).
func (a *app) blockState(b client.Block) string {
	if b.State != "payment-pending" {
		return b.State
	}
	deadline, whose := core.DefaultLimits().ApprovalDeadline, "by default"
	if c, err := a.client(); err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), a.timeout)
		defer cancel()
		if p, err := c.Policy(ctx); err == nil {
			deadline, whose = time.Duration(p.ApprovalDeadlineSeconds)*time.Second, "by the operator's policy"
		}
	}
	return fmt.Sprintf("payment-pending: waits for an administrator's approval ('capblock blocks approve %s') until %s, "+
		"%s before its start %s; then it is payment-failed and its charge reversed",
		b.ID, fmtZoned(b.StartTime.Add(-deadline)), humantime.FormatDuration(deadline), whose)
}

// severalTeams reports whether blocks are of more than one team: an
// administrator's view, which shows whose each block is.
func severalTeams(blocks []client.Block) bool {
	for _, b := range blocks {
		if b.Team != blocks[0].Team {
			return true
		}
	}
	return false
}

// isAdmin reports whether the client's token is an administrator's, who
// sees every team's things and is shown whose each is; false when the
// server cannot say.
func isAdmin(ctx context.Context, c *client.Client) bool {
	u, _, err := c.Whoami(ctx)
	return err == nil && u.Role == "admin"
}

// printBlocks writes blocks as a table that fits 120 columns with the
// service's ids (zone and hours are in 'blocks show'); a TEAM column, of
// the names in teamNames (by id), when teamNames is given (an
// administrator's view, or blocks of several teams).
func (a *app) printBlocks(blocks []client.Block, teamNames map[string]string) error {
	teams := teamNames != nil
	headers := []string{"ID", "NAME", "STATE", "INSTANCES", "START (UTC)", "END (UTC)", "FEE"}
	if teams {
		headers = slices.Insert(headers, 2, "TEAM")
	}
	t := a.newTable(headers...).clipToFit("NAME", "TEAM")
	for _, b := range blocks {
		name := b.Name
		if name == "" {
			name = "-"
		}
		row := []string{b.ID, name, b.State, fmt.Sprintf("%d × %s", b.InstanceCount, b.InstanceType),
			fmtTime(b.StartTime), fmtTime(b.EndTime), b.UpfrontFee.String()}
		if teams {
			row = slices.Insert(row, 2, nameOf(teamNames, b.Team))
		}
		t.row(row...)
	}
	return t.flush()
}

// formatLabels writes k=v pairs sorted by key.
func formatLabels(m map[string]string) string {
	if len(m) == 0 {
		return "-"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + m[k]
	}
	return strings.Join(parts, ",")
}

// formatGPUs writes GPU indexes compactly: [0 1 2 3 5] → "0-3,5".
func formatGPUs(gpus []int) string {
	if len(gpus) == 0 {
		return "-"
	}
	s := append([]int(nil), gpus...)
	sort.Ints(s)
	var parts []string
	for i := 0; i < len(s); {
		j := i
		for j+1 < len(s) && s[j+1] == s[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d-%d", s[i], s[j]))
		} else {
			parts = append(parts, strconv.Itoa(s[i]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}
