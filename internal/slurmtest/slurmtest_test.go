package slurmtest_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"capblock/internal/slurmtest"
)

// TestStart: the cluster knows its nodes with a slurmd (idle) and those
// declared without one, with their GPUs and features; a user's job that
// asks for GPUs runs on a node as that user and completes.
func TestStart(t *testing.T) {
	c := slurmtest.Start(t, slurmtest.Options{Nodes: 2, Declared: 2, GPUs: 4, Features: func(i int) []string {
		return []string{"rack=r" + string(rune('1'+i/2))}
	}})
	if want := []string{"sim0", "sim1"}; !slices.Equal(c.Nodes, want) {
		t.Errorf("nodes %v, want %v", c.Nodes, want)
	}
	if want := []string{"sim2", "sim3"}; !slices.Equal(c.Declared, want) {
		t.Errorf("declared nodes %v, want %v", c.Declared, want)
	}
	out, err := c.Run(t.Context(), "", "sinfo", "--noheader", "--Node", "--format=%N %G %f")
	if err != nil {
		t.Fatal(err)
	}
	want := "sim0 gpu:h100:4 rack=r1\nsim1 gpu:h100:4 rack=r1\nsim2 gpu:h100:4 rack=r2\nsim3 gpu:h100:4 rack=r2"
	if got := norm(string(out)); got != want {
		t.Errorf("sinfo:\n%s\nwant:\n%s", got, want)
	}

	// A job of an unprivileged user, on two GPUs.
	id, err := c.Run(t.Context(), "nobody", "sbatch", "--parsable", "--time=1", "--gres=gpu:h100:2", "--output=/dev/null", "--wrap", "exit 0")
	if err != nil {
		t.Fatal(err)
	}
	job := strings.TrimSpace(string(id))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for {
		out, err := c.Run(ctx, "", "scontrol", "show", "job", job, "--oneliner")
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(out), "JobState=COMPLETED") {
			if !strings.Contains(string(out), "UserId=nobody(") {
				t.Errorf("the job ran as another user: %s", out)
			}
			break
		}
		if strings.Contains(string(out), "JobState=FAILED") || ctx.Err() != nil {
			t.Fatalf("the job did not complete: %s", out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// norm drops the spacing differences of sinfo's columns.
func norm(s string) string {
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		lines = append(lines, strings.Join(strings.Fields(l), " "))
	}
	return strings.Join(lines, "\n")
}
