package executor

// Probe reports how an Executor on this machine would contain its
// instances (cgroups and which limits they can apply, a private /tmp),
// without starting one, so that a server can say at start what it cannot
// do. It prepares the cgroups as New does.
func Probe() Isolation {
	_, isolation := findCgroups(options{})
	isolation.PrivateTmp, isolation.TmpReason = findPrivateTmp(options{})
	return isolation
}
