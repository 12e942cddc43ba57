package simulate_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"testing/cryptotest"
	"time"

	"capblock/internal/simulate"
)

// TestSimulate runs the simulation over many seeds, each for a number of
// steps, every invariant checked after each step. The environment sets
// what it runs:
//
//	CAPBLOCK_SIM_SEED   one seed to run (a failure's replay)
//	CAPBLOCK_SIM_FIRST  the first seed of a range (default 1)
//	CAPBLOCK_SIM_SEEDS  how many seeds from the first
//	CAPBLOCK_SIM_OPS    steps per seed
//	CAPBLOCK_SIM_TRACE  set: log every step
//	CAPBLOCK_SIM_COUNTS set: log the operations' outcomes
//	CAPBLOCK_SIM_FAULTS the fault rates, as in "commit-fails=0.01,commit-lost=0.01,engine-fails=0.1,engine-lost=0.05,
//	                    record-fails=0.02,record-lost=0.02,engine-hangs=0.02,commit-crashes=0.005,commit-slow=0.5,
//	                    leader-deposed=0.5" (the others as testFaults)
//
// Each seed runs with crypto/rand fixed to it (cryptotest), so that the
// service's ids, which order what it sorts by id, are the same on a
// replay: a failing seed prints the one command that runs it again and
// fails at the same step. That makes the seeds run one after another in
// a process; scripts/soak.sh runs a process per core.
func TestSimulate(t *testing.T) {
	first, seeds, ops := simDefaults()
	if s := os.Getenv("CAPBLOCK_SIM_SEED"); s != "" {
		first, seeds = envUint(t, "CAPBLOCK_SIM_SEED", 0), 1
	} else {
		first = envUint(t, "CAPBLOCK_SIM_FIRST", first)
		seeds = envUint(t, "CAPBLOCK_SIM_SEEDS", seeds)
	}
	ops = envUint(t, "CAPBLOCK_SIM_OPS", ops)
	faults := envFaults(t)
	dir := memDir(t)
	began := time.Now()
	failed := 0
	var total uint64
	for seed := first; seed < first+seeds; seed++ {
		cryptotest.SetGlobalRandom(t, seed)
		cfg := simulate.Config{Seed: seed, Ops: int(ops), Dir: dir, Faults: faults}
		if os.Getenv("CAPBLOCK_SIM_TRACE") != "" {
			cfg.Trace = func(line string) { t.Log(line) }
		}
		rep, err := simulate.Run(t.Context(), cfg)
		total += ops
		if err != nil {
			failed++
			t.Errorf("%v\nreplay: %s", err, replay(seed, ops))
			if failed == 3 {
				t.Fatalf("stopping after 3 failing seeds")
			}
			continue
		}
		if seeds <= 4 || testing.Verbose() {
			t.Logf("seed %d: %d steps in %s; %d blocks; commits failed %d, lost %d, died in %d, slow for %s; outbox records failed %d, lost %d; "+
				"engine calls failed %d, lost %d, hung %d (landed late %d, refused late %d); %d crashes; %d leaders deposed; transcript %016x",
				seed, rep.Ops, rep.Elapsed.Round(time.Millisecond), rep.Blocks, rep.CommitsFailed, rep.CommitsLost, rep.CommitsDied, rep.SlowCommits,
				rep.RecordsFailed, rep.RecordsLost, rep.EngineFailed, rep.EngineLost, rep.EngineHung, rep.LateLanded, rep.LateRefused,
				rep.Crashes, rep.LeadersDeposed, rep.Transcript)
			if os.Getenv("CAPBLOCK_SIM_COUNTS") != "" {
				t.Logf("seed %d: operations %v", seed, rep.Counts)
			}
		}
	}
	d := time.Since(began)
	t.Logf("seeds %d..%d: %d steps in %s, %.0f steps/s", first, first+seeds-1, total, d.Round(time.Millisecond), float64(total)/d.Seconds())
}

// testFaults are the faults TestSimulate injects: DefaultFaults.
func testFaults() simulate.Faults { return simulate.DefaultFaults }

// envFaults reads CAPBLOCK_SIM_FAULTS over testFaults.
func envFaults(t *testing.T) simulate.Faults {
	f := testFaults()
	s := os.Getenv("CAPBLOCK_SIM_FAULTS")
	if s == "" {
		return f
	}
	for _, kv := range strings.Split(s, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(kv), "=")
		p, err := strconv.ParseFloat(v, 64)
		if err != nil || p < 0 || p > 1 {
			t.Fatalf("CAPBLOCK_SIM_FAULTS: %q: want a probability", kv)
		}
		switch k {
		case "commit-fails":
			f.CommitFails = p
		case "commit-lost":
			f.CommitLosesAnswer = p
		case "engine-fails":
			f.EngineFails = p
		case "engine-lost":
			f.EngineLosesAnswer = p
		case "record-fails":
			f.RecordFails = p
		case "record-lost":
			f.RecordLosesAnswer = p
		case "engine-hangs":
			f.EngineHangs = p
		case "commit-crashes":
			f.CommitCrashes = p
		case "commit-slow":
			f.CommitSlow = p
		case "leader-deposed":
			f.LeaderDeposed = p
		default:
			t.Fatalf("CAPBLOCK_SIM_FAULTS: unknown fault %q", k)
		}
	}
	return f
}

// simDefaults are the seeds and steps of a plain `go test`: about ten
// seconds, and under the race detector (which slows it about tenfold)
// fewer steps, to keep the suite's run of this package near half a
// minute on two cores.
func simDefaults() (first, seeds, ops uint64) {
	switch {
	case raceOn:
		return 1, 2, 500
	case testing.Short():
		return 1, 2, 500
	}
	return 1, 8, 2000
}

// replay is the command that runs one seed again (with the faults of
// this run, when the environment set them).
func replay(seed, ops uint64) string {
	faults := ""
	if f := os.Getenv("CAPBLOCK_SIM_FAULTS"); f != "" {
		faults = fmt.Sprintf("CAPBLOCK_SIM_FAULTS=%q ", f)
	}
	return fmt.Sprintf("%sCAPBLOCK_SIM_SEED=%d CAPBLOCK_SIM_OPS=%d go test ./internal/simulate -run 'TestSimulate$' -count=1 -v", faults, seed, ops)
}

func envUint(t *testing.T, name string, def uint64) uint64 {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("%s=%q: want a whole number", name, s)
	}
	return n
}

// memDir is where the databases go: /dev/shm when the machine has room
// there, where a commit's sync costs nothing, else the test's temporary
// directory.
func memDir(t *testing.T) string {
	var fs syscall.Statfs_t
	if syscall.Statfs("/dev/shm", &fs) == nil && fs.Bavail*uint64(fs.Bsize) >= 256<<20 {
		if dir, err := os.MkdirTemp("/dev/shm", "capblock-sim-"); err == nil {
			t.Cleanup(func() { os.RemoveAll(dir) })
			return dir
		}
	}
	return t.TempDir()
}

// TestSimulateReplays: a seed makes the same steps with the same answers
// each time it runs, whatever ran before it in the process, so that the
// command a failure prints reproduces it.
func TestSimulateReplays(t *testing.T) {
	ops := 800
	if raceOn || testing.Short() {
		ops = 150
	}
	dir := memDir(t)
	run := func(seed uint64) simulate.Report {
		cryptotest.SetGlobalRandom(t, seed)
		rep, err := simulate.Run(t.Context(), simulate.Config{Seed: seed, Ops: ops, Dir: dir, Faults: testFaults()})
		if err != nil {
			t.Fatalf("%v\nreplay: %s", err, replay(seed, uint64(ops)))
		}
		return rep
	}
	first, other, again := run(7), run(8), run(7)
	if again.Transcript != first.Transcript {
		t.Errorf("seed 7 ran twice: transcripts %016x and %016x; its steps or answers differ", first.Transcript, again.Transcript)
	}
	if other.Transcript == first.Transcript {
		t.Errorf("seeds 7 and 8 made the same transcript %016x", first.Transcript)
	}
}
