//go:build race

package simulate_test

// raceOn: the race detector slows the simulation about tenfold.
const raceOn = true
