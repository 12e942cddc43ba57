package slurm

// ExpandHostlist is expandHostlist, for the side by side's check of what
// each reservation holds.
var ExpandHostlist = expandHostlist
