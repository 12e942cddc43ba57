//go:build !race

package simulate_test

const raceOn = false
