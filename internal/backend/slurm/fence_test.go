package slurm_test

import (
	"strings"
	"testing"
	"time"

	"capblock/internal/backend/slurm"
	"capblock/internal/slurmtest"
)

// TestVersionFence: a write of an older version than the reservation
// records is refused, whichever process sends it, and the reservation
// keeps the newer version's nodes and window.
func TestVersionFence(t *testing.T) {
	t.Setenv("TZ", slurmtest.DefaultTZ)
	c := slurmtest.Start(t, slurmtest.Options{Nodes: 4})
	ctx := t.Context()
	hour := time.Now().UTC().Truncate(time.Hour)
	be := newBackend(t, c, slurm.Config{SoldModels: []string{"H100"}})
	v3 := block("cb-fence", hour.Add(3*time.Hour), hour.Add(5*time.Hour), "sim0", "sim1")
	v3.Version = 3
	v2 := block("cb-fence", hour.Add(2*time.Hour), hour.Add(6*time.Hour), "sim2")
	v2.Version = 2

	// keeps3 checks that the reservation is still version 3's.
	keeps3 := func(what string) {
		t.Helper()
		got, ok := reservation(t, c, v3.ID)
		if !ok || got.Nodes != "sim[0-1]" || !got.Start.Equal(v3.Start) || !got.End.Equal(v3.End) {
			t.Errorf("%s: reservation %+v (found %v), want version 3's: sim[0-1] from %s to %s", what, got, ok, v3.Start, v3.End)
		}
		if v := recordedVersion(t, c, v3.ID); v != "capblock:v=3" {
			t.Errorf("%s: the reservation records %q, want capblock:v=3", what, v)
		}
	}

	if err := be.Reserve(ctx, v3); err != nil {
		t.Fatal(err)
	}
	keeps3("version 3 written")
	// The same process, then a new one that remembers nothing (a leader
	// that lost its lease, or a late replica): Slurm's record fences it.
	other := newBackend(t, c, slurm.Config{SoldModels: []string{"H100"}})
	for _, w := range []struct {
		what  string
		be    *slurm.Backend
		write func(*slurm.Backend) error
	}{
		{"a release of version 2 by a process that remembers nothing", newBackend(t, c, slurm.Config{}),
			func(b *slurm.Backend) error { return b.Release(ctx, v2) }},
		{"a reserve of version 2", be, func(b *slurm.Backend) error { return b.Reserve(ctx, v2) }},
		{"an activation of version 2", be, func(b *slurm.Backend) error { return b.Activate(ctx, v2) }},
		{"a reserve of version 2 by another process", other, func(b *slurm.Backend) error { return b.Reserve(ctx, v2) }},
		{"an activation of version 2 by another process", other, func(b *slurm.Backend) error { return b.Activate(ctx, v2) }},
		{"a release of version 2 by another process", other, func(b *slurm.Backend) error { return b.Release(ctx, v2) }},
	} {
		before := w.be.StaleWrites()
		if err := w.write(w.be); err != nil {
			t.Errorf("%s: %v, want nil (refused, not retried)", w.what, err)
		}
		if n := w.be.StaleWrites() - before; n != 1 {
			t.Errorf("%s: %d stale writes counted, want 1", w.what, n)
		}
		keeps3(w.what)
	}
	// A later version goes through, and records itself; version 3 is
	// then refused by the process that wrote 4 (its memory) and by a
	// third that reads Slurm's record.
	v4 := v3
	v4.Version, v4.End = 4, v3.End.Add(time.Hour)
	if err := other.Reserve(ctx, v4); err != nil {
		t.Fatal(err)
	}
	third := newBackend(t, c, slurm.Config{SoldModels: []string{"H100"}})
	for _, b := range []*slurm.Backend{other, third} {
		before := b.StaleWrites()
		if err := b.Activate(ctx, v3); err != nil || b.StaleWrites() != before+1 {
			t.Errorf("an activation of version 3 after version 4: %v, %d stale writes counted, want nil and 1", err, b.StaleWrites()-before)
		}
	}
	if got, _ := reservation(t, c, v4.ID); got.Nodes != "sim[0-1]" || !got.End.Equal(v4.End) || recordedVersion(t, c, v4.ID) != "capblock:v=4" {
		t.Errorf("version 4: reservation %+v, version %q; want it on sim[0-1] until %s, at capblock:v=4", got, recordedVersion(t, c, v4.ID), v4.End)
	}
	// Released at version 4: the process refuses its own late writes,
	// though Slurm no longer has the reservation to say so.
	if err := other.Release(ctx, v4); err != nil {
		t.Fatal(err)
	}
	before := other.StaleWrites()
	if err := other.Activate(ctx, v3); err != nil || other.StaleWrites() != before+1 {
		t.Errorf("an activation of version 3 after the release of version 4: %v, %d stale writes counted, want nil and 1", err, other.StaleWrites()-before)
	}
	if _, ok := reservation(t, c, v3.ID); ok {
		t.Error("a stale activation re-created the reservation released at version 4")
	}

	t.Run("versions in memory only", func(t *testing.T) {
		mem := newBackend(t, c, slurm.Config{SoldModels: []string{"H100"}})
		mem.KeepVersionsInMemory()
		blk := v3
		blk.ID = "cb-fence-mem"
		if err := mem.Reserve(ctx, blk); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { mem.Release(ctx, blk) })
		stale := v2
		stale.ID = blk.ID
		if err := mem.Reserve(ctx, stale); err != nil || mem.StaleWrites() != 1 {
			t.Errorf("a reserve of version 2 after version 3: %v, %d stale writes, want nil and 1", err, mem.StaleWrites())
		}
		if got, _ := reservation(t, c, blk.ID); got.Nodes != "sim[0-1]" || recordedVersion(t, c, blk.ID) != "(null)" {
			t.Errorf("reservation %+v, recording %q; want version 3's nodes, nothing recorded in Slurm", got, recordedVersion(t, c, blk.ID))
		}
	})
}

// recordedVersion is the BurstBuffer field of reservation name, where
// the backend records its block's version.
func recordedVersion(t *testing.T, c *slurmtest.Cluster, name string) string {
	t.Helper()
	out, err := c.Run(t.Context(), "", "scontrol", "--oneliner", "show", "reservation", name)
	if err != nil {
		return ""
	}
	for _, w := range strings.Fields(string(out)) {
		if v, ok := strings.CutPrefix(w, "BurstBuffer="); ok {
			return v
		}
	}
	return ""
}
