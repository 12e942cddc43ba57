// Package local is capblock's engine on the server's own machine: Sim,
// the simulated backend (the default), which reports the nodes of a
// fleet file and records what a real engine would do with blocks; and
// Workloads, which runs jobs' instances as processes of this machine
// (through the executor's shim, as the teams' users, in cgroups), for the
// sim and local backends.
package local
