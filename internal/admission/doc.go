// Package admission keeps capblock's sold nodes to the pods of the teams
// that hold their blocks: the admission webhooks that `capblock serve
// --backend kubernetes` serves on --admission-listen.
//
// A namespace belongs to a team by its label capblock.io/team=<team id>.
// A pod asks for a block by its label capblock.io/block=<block id>. The
// mutating webhook (MutatePath) gives such a pod, when its namespace's
// team holds the block, the toleration of the sold taint and a required
// node affinity on the block's node label, block.capblock.io/<block id>,
// which the backend puts on the block's nodes while it is active. The
// validating webhook (ValidatePath) sees every pod as it will be stored,
// after every mutation of every webhook, and refuses:
//
//   - a pod that names a block its namespace's team does not hold: another
//     team's block reads exactly as one that does not exist;
//   - a pod that tolerates the sold taint (by its key, or a toleration of
//     every taint: operator Exists and no key) without naming such a block;
//   - a pod that sets spec.nodeName to a sold node without naming such a
//     block, and a block's pod that sets spec.nodeName at all: a pod bound
//     by name skips the scheduler, and the kubelet does not enforce a
//     NoSchedule taint;
//   - a block's pod that tolerates the taint but whose nodeSelector or
//     required node affinity does not keep it on the block's nodes;
//   - a change of a pod's block label, and an update that makes a pod
//     tolerate the taint (tolerations may be added to a pod) without the
//     above. An update that changes none of this passes, so that a pod of
//     an ended block can still lose its finalizers.
//
// Why webhooks served by capblock rather than a policy in the API server
// (ValidatingAdmissionPolicy, MutatingAdmissionPolicy): a policy sees the
// pod and its namespace, but whether a team holds a block, and whether
// the block can take pods, is in capblock's database; a node label could
// tell which team an active block is for, but a policy cannot read
// nodes. Why both a mutating and a validating webhook: mutating webhooks
// and admission plugins that run after capblock's may still add a
// toleration; only the validating phase sees the pod as stored.
//
// Which blocks take pods: a scheduled block and an active block that is
// not terminating. A pod of a scheduled block is admitted and waits
// Pending: no node carries the block's label until the block is active,
// so the pod starts the moment it is, and a pod created before the start
// is what a team submitting work ahead wants. A terminating block takes
// no new pod (its termination evicted the pods it had, and would not see
// a later one); neither does a block waiting for approval or one that has
// ended. The release of a block deletes its pods, Pending ones included.
//
// Exempt namespaces (Config.Exempt, DefaultExempt) are not checked:
// kube-system, where DaemonSets tolerate every taint and only cluster
// administrators create pods, and capblock's own namespace, which must
// never wait on its own webhook. The webhook configurations exclude them
// too (namespaceSelector), so that the API server does not call capblock
// for them at all; and their matchConditions call it only for a pod that
// names a block, tolerates the taint or sets spec.nodeName, so that other
// pods do not depend on capblock being up.
package admission
