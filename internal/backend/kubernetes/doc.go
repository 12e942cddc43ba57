// Package kubernetes is the backend that sells the GPU nodes of a
// Kubernetes cluster: `capblock serve --backend kubernetes`.
//
// Inventory and health come from an informer on the cluster's Nodes, so
// that the leader's poll of both (every --engine-poll) reads memory, not
// the API. A node is sold when it has nvidia.com/gpu (the device plugin's
// resource), an nvidia.com/gpu.product label (GPU feature discovery's)
// that maps to a GPU model (Config.GPUModels, else DefaultModel), and a
// topology.kubernetes.io/zone label; its rack is a label of the
// operator's choice (DefaultRackLabel). Its GPUs are its capacity: a GPU
// that the device plugin takes out of the allocatable makes the node
// unhealthy rather than smaller. A sold node is unhealthy while it is
// NotReady, cordoned or short of GPUs (NodeHealth); a deleted node leaves
// the inventory, and the service records it unhealthy.
//
// Fencing. Every sold node carries a NoSchedule taint
// (capblock.io/sold=true), so that no pod lands on sold capacity without
// tolerating it. The backend puts it on each sold node when the informer
// first lists it, so at start, and whenever a node is added or changed
// and lacks it: a new node, one that became sold (its GPUs or labels
// came), one whose taint was removed by hand. Until then, a node that
// joins without it is open to any pod; operators close that gap by
// registering GPU nodes with the taint (the kubelet's
// --register-with-taints). The backend never removes the taint: a node
// that stops being sold keeps it until an operator decides.
//
// A block's steps, each idempotent, as the outbox applies them:
//
//	activate   label its nodes block.capblock.io/<block>=<team>, and unlabel
//	           the nodes that a replacement moved it off
//	terminate  evict the pods labelled capblock.io/block=<block> (the
//	           Eviction API: grace periods and disruption budgets hold)
//	release    remove its label from every node, delete its pods that are left
//
// A label per block, rather than one capblock.io/block label per node,
// because blocks of instances smaller than a node share it. Label patches
// touch only the block's key, so they need no read of the node and
// cannot undo another block's; the taint's patch, which rewrites the
// node's list of taints, carries the node's resourceVersion instead.
//
// Jobs. Workloads (workloads.go, jobspec.go, instances.go, logs.go) runs
// capblock's jobs on the cluster: each run of a job is an Indexed Job of
// one pod per instance, in the team's namespace (the one labelled
// capblock.io/team=<team>), with the taint's toleration and a required
// affinity on the block's label, RANK from the completion index and
// MASTER_ADDR through a headless Service. The first instance's Start
// makes the Job; the others' find it. An informer on the jobs' pods
// reports each pod's end once on Exits, then removes the pod's finalizer
// (ExitFinalizer), which kept it so that an end while no server watched
// is still seen; a new Open adopts the pods that run. An end waits until
// its instance's Start is applied (starts.go), so that the service never
// counts the end of an instance it has not counted as started. Logs are
// read through the API server. JobsPolicyRules are the rights this adds.
package kubernetes
