package slurm

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"capblock/internal/backend"
	"capblock/internal/core"
)

// slurmTime is how scontrol reads and prints times, in the zone of its
// process: the backend runs it with TZ=UTC.
const slurmTime = "2006-01-02T15:04:05"

// Flags of the reservations the backend creates (argued in doc.go).
const (
	flagIgnoreJobs = "IGNORE_JOBS"
	flagOverlap    = "OVERLAP"
)

// reservation is a Slurm reservation as the backend reads and writes it.
type reservation struct {
	name       string
	nodes      []string // sorted
	start, end time.Time
	users      []string // sorted
	accounts   []string // sorted
	flags      []string
	active     bool // started: its start can no longer move
	overlap    bool // it holds part of a node, which another block may share
	// version is the block's version that capblock last wrote it at;
	// versioned, that Slurm records it (fence.go): read from its
	// BurstBuffer field, or, of a reservation to write, to be written
	// there.
	version   int64
	versioned bool
}

// parseReservation reads a reservation from its one-line record.
func parseReservation(r record) (reservation, error) {
	res := reservation{name: r["ReservationName"], users: sorted(r.list("Users")), accounts: sorted(r.list("Accounts")),
		flags: r.list("Flags"), active: r["State"] == "ACTIVE"}
	res.version, res.versioned = parseVersion(r["BurstBuffer"])
	var err error
	if res.nodes, err = expandHostlist(r["Nodes"]); err != nil {
		return res, err
	}
	res.nodes = sorted(res.nodes)
	for _, f := range []struct {
		key string
		t   *time.Time
	}{{"StartTime", &res.start}, {"EndTime", &res.end}} {
		if *f.t, err = time.ParseInLocation(slurmTime, r[f.key], time.UTC); err != nil {
			return res, fmt.Errorf("reservation %s: %s %q: %w", res.name, f.key, r[f.key], err)
		}
	}
	return res, nil
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	sort.Strings(s)
	return s
}

// want is the reservation that block b should have: its nodes, its
// window, its team's Slurm users and accounts, and its version.
func (b *Backend) want(ctx context.Context, blk core.Block) (reservation, error) {
	res := reservation{name: blk.ID, start: blk.Start.UTC().Truncate(time.Second), end: blk.End.UTC().Truncate(time.Second),
		version: blk.Version, versioned: b.versionsInSlurm}
	whole := true
	for _, p := range blk.Placements {
		if !slices.Contains(res.nodes, p.Node) {
			res.nodes = append(res.nodes, p.Node)
		}
		if gpus, err := b.nodeGPUs(ctx, p.Node); err != nil {
			return res, err
		} else if gpus > 0 && len(p.GPUs) < gpus {
			whole = false
		}
	}
	if len(res.nodes) == 0 {
		return res, fmt.Errorf("block %s is placed on no node", blk.ID)
	}
	sort.Strings(res.nodes)
	res.overlap = !whole
	a, err := b.access(ctx, blk.Team)
	if err != nil {
		return res, err
	}
	res.users, res.accounts = sorted(a.Users), sorted(a.Accounts)
	return res, nil
}

// nodeGPUs is a node's GPU count, from the last read of the nodes, read
// again when the node is not in it; 0 for a node Slurm does not know
// (its reservation is refused, and says so).
func (b *Backend) nodeGPUs(ctx context.Context, node string) (int, error) {
	b.mu.Lock()
	n, ok := b.gpus[node]
	b.mu.Unlock()
	if ok {
		return n, nil
	}
	if _, err := b.readNodes(ctx); err != nil {
		return 0, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.gpus[node], nil
}

// access is who may use a team's reservations: its entry in Teams, by
// id, else by name; else the hold users, logged once per team.
func (b *Backend) access(ctx context.Context, team string) (Access, error) {
	if a, ok := b.cfg.Teams[team]; ok {
		return a, nil
	}
	if b.cfg.TeamName != nil {
		b.mu.Lock()
		name, known := b.names[team]
		b.mu.Unlock()
		if !known {
			var err error
			if name, err = b.cfg.TeamName(ctx, team); err != nil {
				return Access{}, fmt.Errorf("finding the name of team %s: %w", team, err)
			}
			b.mu.Lock()
			b.names[team] = name
			b.mu.Unlock()
		}
		if a, ok := b.cfg.Teams[name]; ok {
			return a, nil
		}
	}
	b.mu.Lock()
	if !b.unmapped[team] {
		b.unmapped[team] = true
		b.log.Warn("a team has no Slurm users or accounts in the fleet file's slurm section: its blocks' reservations hold their nodes, but none of its jobs may use them",
			"team", team, "holdUsers", b.cfg.HoldUsers)
	}
	b.mu.Unlock()
	return Access{Users: b.cfg.HoldUsers}, nil
}

// Reserve holds the block's nodes for its window from its purchase on:
// it creates the reservation, or brings it to the block as given. At a
// purchase the reservation is new, so Reserve creates it without
// reading first, one call; only when Slurm refuses the create does it
// read the reservation, and bring it to the block if it exists. A
// reservation this process wrote last (remembered) is updated from what
// it wrote, without reading it first, one call: a move, an extension, a
// retry; if Slurm refuses that update, or the process does not remember
// the reservation, it is read and updated, as Activate does.
//
// A write older than the version the engine holds is refused (fenced).
func (b *Backend) Reserve(ctx context.Context, blk core.Block) error {
	lock := b.locks.of(blk.ID)
	lock.Lock()
	defer lock.Unlock()
	return b.fenced("reserve", blk, b.reserve(ctx, blk))
}

func (b *Backend) reserve(ctx context.Context, blk core.Block) error {
	if err := b.checkHeld(blk); err != nil {
		return err
	}
	want, err := b.want(ctx, blk)
	if err != nil {
		return err
	}
	now := b.cfg.Now()
	if last, ok := b.remembered(want.name); ok && want.end.After(now) {
		if b.updateRemembered(ctx, last, want, now) == nil {
			return nil
		}
		// Refused (the reservation is gone, or is not as written, or
		// its new nodes are busy): forgotten; read it, as below.
	}
	if b.known(want.name) || !want.end.After(now) {
		return b.ensure(ctx, want, now)
	}
	err = b.createOverlapping(ctx, want, now)
	if err == nil || errors.Is(err, backend.ErrPermanent) {
		return err
	}
	// Refused: it may exist already (created by another replica, or by
	// an earlier try that timed out), which Slurm may say as a duplicate
	// name or as an overlap with itself. The read decides.
	have, found, serr := b.show(ctx, want.name)
	if serr != nil || !found {
		return err
	}
	return b.update(ctx, have, want, now)
}

// Activate brings the block's reservation to the block as given: at
// the block's start (it exists since the purchase, unless the engine
// was another then), after a replacement moved it off a node, and after
// an extension moved its end. It always reads the reservation first,
// whatever this process remembers writing: from the block's start its
// jobs run there, and whatever an operator changed by hand since
// capblock last wrote it is repaired then. A write older than the
// version the engine holds is refused (fenced).
func (b *Backend) Activate(ctx context.Context, blk core.Block) error {
	lock := b.locks.of(blk.ID)
	lock.Lock()
	defer lock.Unlock()
	return b.fenced("activate", blk, b.activate(ctx, blk))
}

func (b *Backend) activate(ctx context.Context, blk core.Block) error {
	if err := b.checkHeld(blk); err != nil {
		return err
	}
	want, err := b.want(ctx, blk)
	if err != nil {
		return err
	}
	return b.ensure(ctx, want, b.cfg.Now())
}

// ensure reads the block's reservation, then creates it or updates what
// differs. A block whose end has passed has nothing left to hold:
// Release follows.
func (b *Backend) ensure(ctx context.Context, want reservation, now time.Time) error {
	have, found, err := b.show(ctx, want.name)
	if err != nil {
		return err
	}
	if !found {
		if !want.end.After(now) {
			return nil
		}
		err := b.createOverlapping(ctx, want, now)
		if !slurmSays(err, "Duplicate reservation name") {
			return err
		}
		// Created meanwhile (another worker, an earlier try that timed
		// out): bring it to the block.
		if have, found, err = b.show(ctx, want.name); err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("reservation %s: Slurm said it exists, then that it does not; trying again", want.name)
		}
	}
	return b.update(ctx, have, want, now)
}

// createOverlapping creates want, overlapping other blocks'
// reservations where they alone are in the way (onlyBlocksInTheWay).
func (b *Backend) createOverlapping(ctx context.Context, want reservation, now time.Time) error {
	err := b.create(ctx, want, now)
	if b.onlyBlocksInTheWay(ctx, err, want) {
		want.overlap = true
		err = b.create(ctx, want, now)
	}
	return err
}

// updateRemembered brings the reservation to want from last, what this
// process last wrote of it, without reading it: one call. Its nodes are
// set whatever last says, so that once Slurm accepts the update the
// reservation holds want's nodes even if someone changed them by hand
// since; a field an operator changed by hand that want does not change
// (the users, a start) stays as they left it until the next read
// (Activate's at the latest, or the read after any refusal). Slurm
// refuses the update of a reservation that is gone; any refusal
// forgets last (update), and Reserve reads the reservation.
//
// Why this is enough: the leader's outbox is the only writer of the
// reservations of capblock in normal operation, and it applies a
// block's actions one at a time, so what this process last wrote is
// what Slurm holds; a new leader starts remembering nothing, and reads
// each reservation before its first update of it. A process that leads
// again after another led meanwhile may remember what the other has
// since changed: the nodes are still set, an end or start that differs
// from what it remembers is sent, and what is left (a field the other
// changed and the block then changed back) is repaired at Activate.
func (b *Backend) updateRemembered(ctx context.Context, last, want reservation, now time.Time) error {
	last.active = last.active || !last.start.After(now) // started since
	last.nodes = nil
	return b.update(ctx, last, want, now)
}

// update brings the reservation have to want: what differs, if
// anything. It remembers the reservation as written, or forgets it
// when Slurm refuses.
func (b *Backend) update(ctx context.Context, have, want reservation, now time.Time) error {
	if err := checkRecorded(have, want); err != nil {
		return err
	}
	args := updateArgs(have, want, now)
	if len(args) == 0 {
		b.remember(have)
		b.hold(want.name, want.version)
		return nil
	}
	_, err := b.scontrol(ctx, append([]string{"update", "ReservationName=" + want.name}, args...)...)
	if b.onlyBlocksInTheWay(ctx, err, want) {
		want.overlap = true
		args = updateArgs(have, want, now)
		_, err = b.scontrol(ctx, append([]string{"update", "ReservationName=" + want.name}, args...)...)
	}
	if err != nil {
		b.forget(want.name)
		return refusal(fmt.Errorf("updating reservation %s: %w", want.name, err))
	}
	b.remember(updated(have, want, now))
	b.hold(want.name, want.version)
	b.log.Info("updated a block's Slurm reservation", "block", want.name, "changes", strings.Join(args, " "))
	return nil
}

// updated is the reservation have once updateArgs(have, want, now) has
// applied.
func updated(have, want reservation, now time.Time) reservation {
	res := want
	res.flags = slices.Clone(have.flags)
	if !slices.Equal(have.nodes, want.nodes) {
		res.flags = withFlag(res.flags, flagIgnoreJobs)
		if want.overlap {
			res.flags = withFlag(res.flags, flagOverlap)
		}
	}
	switch {
	case have.active:
		res.start = have.start
	case !want.start.After(now):
		res.start = now
	}
	res.active = have.active || !res.start.After(now)
	if !want.end.After(now) {
		res.end = have.end
	}
	return res
}

// created is the reservation create(want, now) makes.
func created(want reservation, now time.Time) reservation {
	res := want
	res.flags = []string{flagIgnoreJobs}
	if want.overlap {
		res.flags = append(res.flags, flagOverlap)
	}
	if !want.start.After(now) {
		res.start, res.active = now, true
	}
	return res
}

func withFlag(flags []string, flag string) []string {
	if slices.Contains(flags, flag) {
		return flags
	}
	return append(flags, flag)
}

// onlyBlocksInTheWay reports whether err is Slurm's refusal of want for
// overlapping other reservations, all of them capblock's blocks. Moves
// swap nodes among the blocks that wait for their start (a purchase
// re-packs them), and each block's reserve applies alone: a block may
// take nodes another block's reservation still holds until its own move
// applies, moments later. capblock's placement keeps its blocks apart, so
// the block's reservation may then overlap theirs (OVERLAP). A
// reservation made by hand in the way (maintenance) is still refused, and
// the action retried and shown failing until an operator resolves it.
//
// Why the overlap cannot let two blocks' jobs share a node: only
// tentative blocks move, and a block is tentative until its lock-in, a
// while before its start (an hour by default); a reservation runs no job
// before its start, so the two reservations overlap only in hours no
// job can use yet, and the other block's move, applied moments later
// and retried until it is, ends the overlap long before either starts. The nodes
// stay reserved throughout: deleting the reservation and creating it
// again instead would leave them free for a moment, and a job Slurm
// started on them then would run into the block (IGNORE_JOBS lets the
// new reservation take its nodes anyway).
//
// What OVERLAP costs: Slurm 22.05 cannot clear it (Flags=-OVERLAP and
// Flags-=OVERLAP are refused as flags it cannot parse), and it skips its
// overlap check for such a reservation both ways, so Slurm no longer
// catches a fault of capblock's own placement on it. The re-pack moves
// few blocks (core.repackSweep.assign keeps what it can in place), so
// few reservations carry it.
//
// Why it reads every reservation, rather than deciding from the
// reservations this process wrote (remembered): Slurm's refusal does not
// name what is in the way, and what this process wrote says nothing of
// the reservations others made. Even when a block's reservation that it
// wrote holds the nodes at those hours, an operator's maintenance
// reservation may hold them too (MAINT or OVERLAP lets it share them),
// and only the read of all of them sees it.
func (b *Backend) onlyBlocksInTheWay(ctx context.Context, err error, want reservation) bool {
	if !slurmSays(err, "overlaps") || want.overlap {
		return false
	}
	out, lerr := b.scontrol(ctx, "show", "reservation")
	if lerr != nil {
		return false
	}
	inTheWay := 0
	for _, r := range parseRecords(out) {
		other, perr := parseReservation(r)
		if perr != nil || other.name == want.name || !other.start.Before(want.end) || !want.start.Before(other.end) ||
			!slices.ContainsFunc(other.nodes, func(n string) bool { return slices.Contains(want.nodes, n) }) {
			continue
		}
		if !strings.HasPrefix(other.name, blockIDPrefix) {
			return false
		}
		inTheWay++
	}
	return inTheWay > 0
}

// blockIDPrefix begins the id of every block, and so the name of every
// reservation of capblock's.
const blockIDPrefix = "cb-"

// show reads the reservation named name; found is false when there is
// none.
func (b *Backend) show(ctx context.Context, name string) (res reservation, found bool, err error) {
	b.forget(name) // what follows the read remembers what it writes
	out, err := b.scontrol(ctx, "show", "reservation", name)
	if slurmSays(err, "not found") {
		b.setKnown(name, false)
		return reservation{}, false, nil
	}
	if err != nil {
		return reservation{}, false, fmt.Errorf("reading reservation %s: %w", name, err)
	}
	for _, r := range parseRecords(out) {
		if r["ReservationName"] == name {
			res, err := parseReservation(r)
			b.setKnown(name, err == nil)
			if err == nil && res.versioned {
				b.hold(name, res.version)
			}
			return res, err == nil, err
		}
	}
	b.setKnown(name, false)
	return reservation{}, false, nil
}

// remembered is the reservation named name as this process last wrote
// it, created or updated (updateRemembered); ok is false when it wrote
// none since its start, or since its last read of it, its deletion or a
// refusal of a command of it.
func (b *Backend) remembered(name string) (res reservation, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	res, ok = b.wrote[name]
	return res, ok
}

func (b *Backend) remember(res reservation) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.wrote[res.name] = res
}

func (b *Backend) forget(name string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.wrote, name)
}

// known reports whether this process has last seen the reservation
// named name exist (made it, or read it). It only chooses which call
// Reserve tries first: a reservation deleted since (by hand, by another
// replica) is read, found missing and created; one made since by
// another replica is refused as a duplicate, read and updated.
func (b *Backend) known(name string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.exists[name]
}

func (b *Backend) setKnown(name string, exists bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if exists {
		b.exists[name] = true
	} else {
		delete(b.exists, name)
	}
}

// create creates the reservation want, from now if its start has passed.
func (b *Backend) create(ctx context.Context, want reservation, now time.Time) error {
	args := append([]string{"create", "reservation", "ReservationName=" + want.name, "StartTime=" + startArg(want.start, now)},
		createArgs(want)...)
	if _, err := b.scontrol(ctx, args...); err != nil {
		b.forget(want.name)
		return refusal(fmt.Errorf("creating reservation %s: %w", want.name, err))
	}
	b.setKnown(want.name, true)
	b.remember(created(want, now))
	b.hold(want.name, want.version)
	b.log.Info("created a block's Slurm reservation", "block", want.name, "nodes", strings.Join(want.nodes, ","),
		"start", want.start, "end", want.end)
	return nil
}

// createArgs are the fields of a new reservation besides its name and
// start.
func createArgs(want reservation) []string {
	flags := flagIgnoreJobs
	if want.overlap {
		flags += "," + flagOverlap
	}
	args := []string{"EndTime=" + want.end.Format(slurmTime), "Nodes=" + strings.Join(want.nodes, ","), "Flags=" + flags}
	if len(want.users) > 0 {
		args = append(args, "Users="+strings.Join(want.users, ","))
	}
	if len(want.accounts) > 0 {
		args = append(args, "Accounts="+strings.Join(want.accounts, ","))
	}
	if want.versioned {
		args = append(args, versionArg(want.version))
	}
	return args
}

// startArg is a start as scontrol takes it: "now" once it has passed
// (Slurm refuses a start in the past).
func startArg(start, now time.Time) string {
	if !start.After(now) {
		return "now"
	}
	return start.Format(slurmTime)
}

// updateArgs are the fields of `scontrol update` that bring have to
// want at now; none when they agree. The version is recorded when
// want records it and have holds another. The start of a reservation that
// has begun cannot move (Slurm refuses); an end that has passed is left
// to Release. New nodes need IGNORE_JOBS again: Slurm checks the jobs
// running on them at each update.
func updateArgs(have, want reservation, now time.Time) []string {
	var args []string
	if !slices.Equal(have.nodes, want.nodes) {
		flags := flagIgnoreJobs
		if want.overlap && !slices.Contains(have.flags, flagOverlap) {
			flags += "," + flagOverlap
		}
		args = append(args, "Nodes="+strings.Join(want.nodes, ","), "Flags="+flags)
	}
	if !have.active {
		if s := startArg(want.start, now); s == "now" && have.start.After(now) || s != "now" && !have.start.Equal(want.start) {
			args = append(args, "StartTime="+s)
		}
	}
	if want.end.After(now) && !have.end.Equal(want.end) {
		args = append(args, "EndTime="+want.end.Format(slurmTime))
	}
	args = append(args, listArgs("Users", have.users, want.users)...)
	args = append(args, listArgs("Accounts", have.accounts, want.accounts)...)
	if want.versioned && (!have.versioned || have.version != want.version) {
		args = append(args, versionArg(want.version))
	}
	return args
}

// listArgs sets a reservation's users or accounts to want: the list
// itself, or, to empty it, Slurm's removal of each name ("Users=-bob"),
// since an empty value is refused.
func listArgs(key string, have, want []string) []string {
	if slices.Equal(have, want) {
		return nil
	}
	if len(want) > 0 {
		return []string{key + "=" + strings.Join(want, ",")}
	}
	removed := make([]string, len(have))
	for i, n := range have {
		removed[i] = "-" + n
	}
	return []string{key + "=" + strings.Join(removed, ",")}
}

// refusal marks as permanent a refusal that no retry mends: a node that
// Slurm does not know, or a user or account it does not know. The
// outbox then records the action failed, for an operator, and the
// block's next action (a replacement's, after the node left the
// inventory) may run. Other refusals (nodes busy in another
// reservation, the controller out of reach) are retried.
func refusal(err error) error {
	for _, text := range []string{"Invalid node name", "Invalid user id", "Invalid account"} {
		if slurmSays(err, text) {
			return fmt.Errorf("%w: %w", backend.ErrPermanent, err)
		}
	}
	return err
}
