package slurmtest

import (
	"fmt"
	"path/filepath"
	"strings"
)

// layout is what the configuration files name: the cluster's folder,
// its ports and its nodes.
type layout struct {
	dir       string
	cluster   string
	ctldPort  int
	deadPort  int // where nothing listens: the declared nodes without a slurmd
	nodes     []nodeSpec
	gpus      int
	gpuType   string
	killWait  int // seconds between a cancelled job's SIGTERM and SIGKILL
	partition string
}

// nodeSpec is one declared node; port is its slurmd's, or 0 for a node
// that no slurmd plays.
type nodeSpec struct {
	name     string
	port     int
	features []string
}

// slurmConf is the controller's and the nodes' slurm.conf: every path in
// the cluster's folder, root as SlurmUser (the tests run as root), no
// accounting, and no cgroup confinement (proctrack/linuxproc, task/none),
// so that it runs in a container. config_overrides lets a node declare
// more CPUs and memory than the host has: every slurmd of the cluster
// runs on the same host. Nodes are whole-node shared per job
// (select/cons_tres by core), each with its GPUs as GRES.
func slurmConf(l layout) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	p("# Written by internal/slurmtest for one test; removed when it ends.")
	p("ClusterName=%s", l.cluster)
	p("SlurmctldHost=localhost(127.0.0.1)")
	p("SlurmctldPort=%d", l.ctldPort)
	p("AuthType=auth/munge")
	p("AuthInfo=socket=%s", filepath.Join(l.dir, "munge", "munge.socket"))
	p("CredType=cred/munge")
	p("SlurmUser=root")
	p("SlurmdUser=root")
	p("StateSaveLocation=%s", filepath.Join(l.dir, "state"))
	p("SlurmdSpoolDir=%s", filepath.Join(l.dir, "spool", "%n"))
	p("SlurmctldPidFile=%s", filepath.Join(l.dir, "slurmctld.pid"))
	p("SlurmdPidFile=%s", filepath.Join(l.dir, "slurmd-%n.pid"))
	p("SlurmctldLogFile=%s", filepath.Join(l.dir, "slurmctld.log"))
	p("SlurmdLogFile=%s", filepath.Join(l.dir, "slurmd-%n.log"))
	p("SlurmdParameters=config_overrides")
	p("ProctrackType=proctrack/linuxproc")
	p("TaskPlugin=task/none")
	p("MpiDefault=none")
	p("SchedulerType=sched/backfill")
	p("SelectType=select/cons_tres")
	p("SelectTypeParameters=CR_Core")
	p("GresTypes=gpu")
	p("ReturnToService=2")
	p("KillWait=%d", l.killWait)
	p("JobCompType=jobcomp/none")
	p("AccountingStorageType=accounting_storage/none")
	p("JobAcctGatherType=jobacct_gather/none")
	for _, n := range l.nodes {
		port := n.port
		if port == 0 {
			port = l.deadPort
		}
		features := ""
		if len(n.features) > 0 {
			features = " Feature=" + strings.Join(n.features, ",")
		}
		p("NodeName=%s NodeAddr=127.0.0.1 Port=%d CPUs=%d RealMemory=%d Gres=gpu:%s:%d%s",
			n.name, port, l.gpus, 1024*l.gpus, l.gpuType, l.gpus, features)
	}
	p("PartitionName=%s Nodes=ALL Default=YES MaxTime=INFINITE State=UP", l.partition)
	return b.String()
}

// gresConf gives every node its GPUs as character devices of the
// cluster's folder (a GPU GRES without File= makes a node INVAL): the
// nodes share the same devices, which no test opens.
func gresConf(l layout) string {
	var b strings.Builder
	files := filepath.Join(l.dir, "dev", "nvidia") + fmt.Sprintf("[0-%d]", l.gpus-1)
	if l.gpus == 1 {
		files = filepath.Join(l.dir, "dev", "nvidia0")
	}
	for _, n := range l.nodes {
		fmt.Fprintf(&b, "NodeName=%s Name=gpu Type=%s File=%s\n", n.name, l.gpuType, files)
	}
	return b.String()
}

// cgroupConf lets slurmd pick the host's cgroup version; with
// proctrack/linuxproc and task/none it creates no cgroup.
const cgroupConf = "CgroupPlugin=autodetect\n"
