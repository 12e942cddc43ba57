package simulate_test

import (
	"testing"
	"testing/cryptotest"

	"capblock/internal/simulate"
)

// Defects the simulation found on a seed that no smaller scenario
// reproduces yet: the seed itself is kept, run to just past the step
// that found it. A change of the workload's mix moves what a seed does,
// so each names the defect: when its seed no longer reaches it, a
// scenario in defects_test.go should take its place.
var defectSeeds = []struct {
	name  string
	seed  uint64
	steps int
	why   string
}{
	{
		name: "SpotChargeBeyondTheBudget", seed: 5, steps: 650,
		why: "a spot run that outlived the hours its team's budget paid for (no leader pass stopped it in time) " +
			"was charged in full, past the budget; its charge now stops at what is left of the budget",
	},
	{
		name: "StartOnAGPUAnotherRunStillHas", seed: 5, steps: 750,
		why: "an instance started on a GPU that an instance of another run, stopped late, still ran on; " +
			"a start now waits until the GPUs' earlier instances have ended",
	},
	{
		name: "AdoptedInstanceOfAPreemptedRun", seed: 46, steps: 800,
		why: "a new leader adopted an instance of a spot run preempted while its stop failed, whose backfill the job " +
			"no longer recorded, and started another run on its GPU; such an instance now holds back every start until it ends",
	},
	{
		name: "StartAtItsBlocksEnd", seed: 108, steps: 5000,
		why: "an instance started on a block whose end had come while the store still had it active (its expiry not yet " +
			"stored); a start now gives way at the block's end",
	},
	{
		name: "ExitWhoseRecordFailed", seed: 133, steps: 5000,
		why: "an instance's exit whose commit failed (the disk failed before it was durable) was never recorded: " +
			"its job ran forever with the instance gone; such an exit is now recorded again at the next pass",
	},
	{
		name: "SpotStartAfterItsWindow", seed: 23, steps: 1500,
		why: "a spot instance whose start came after its window closed (a slow commit moved the clock 32 minutes) " +
			"started on GPUs a scheduled block of its team held and did not lend; the start now gives way",
	},
}

func TestDefectSeeds(t *testing.T) {
	for _, d := range defectSeeds {
		t.Run(d.name, func(t *testing.T) {
			if raceOn && d.steps > 2000 {
				t.Skip("a long seed: run without the race detector (go test, scripts/soak.sh)")
			}
			cryptotest.SetGlobalRandom(t, d.seed)
			_, err := simulate.Run(t.Context(), simulate.Config{Seed: d.seed, Ops: d.steps, Dir: memDir(t), Faults: testFaults()})
			if err != nil {
				t.Errorf("%s (%s): %v\nreplay: %s", d.name, d.why, err, replay(d.seed, uint64(d.steps)))
			}
		})
	}
}
