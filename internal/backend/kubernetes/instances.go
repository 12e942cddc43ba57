package kubernetes

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"capblock/internal/backend"
)

// instances is an open Workloads: an informer on the pods of capblock's
// jobs (those labelled JobLabel, in every namespace), and a reporter that
// sends each pod's end on Exits once, then removes ExitFinalizer from the
// pod. A run's pods are found again by their labels and annotations, so
// that a new server, or a new leader, adopts them.
//
// An end is reported at least once: a server that stops between sending
// it and removing the finalizer reports it again from its next start, as
// the service allows (an instance's repeated end changes nothing). It is
// reported only once the instance's Start is applied (starts.go).
type instances struct {
	wl     *Workloads
	pods   cache.Indexer
	queue  workqueue.TypedRateLimitingInterface[string] // pods whose end may be due, by key
	exits  chan backend.InstanceExit
	ctx    context.Context
	cancel context.CancelFunc
	stop   func() // the informer's
	done   sync.WaitGroup
	once   sync.Once

	mu       sync.Mutex
	gone     map[string]*corev1.Pod // pods deleted from the cluster before their end was reported, by key
	reported map[types.UID]bool     // ends sent, whose pods may still hold the finalizer
	made     map[string]bool        // runs whose Job and Service exist
	starts   *backend.Starts        // which instances the service counts as started
}

// runIndex indexes the informer's pods by their run's key.
const runIndex = "run"

// openInstances starts the informer, waits until it holds every pod of
// capblock's jobs, and starts the reporter.
func openInstances(wl *Workloads) (*instances, error) {
	ctx, cancel := context.WithCancel(context.Background())
	factory := informers.NewSharedInformerFactoryWithOptions(wl.be.client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = JobLabel }),
		informers.WithTransform(trimPod))
	inf := factory.Core().V1().Pods().Informer()
	in := &instances{
		wl: wl, pods: inf.GetIndexer(), ctx: ctx, cancel: cancel,
		queue:    workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
		exits:    make(chan backend.InstanceExit),
		stop:     factory.Shutdown,
		gone:     map[string]*corev1.Pod{},
		reported: map[types.UID]bool{},
		made:     map[string]bool{},
		starts:   backend.NewStarts(),
	}
	if err := inf.AddIndexers(cache.Indexers{runIndex: podRun}); err != nil {
		cancel()
		return nil, fmt.Errorf("indexing the jobs' pods: %w", err)
	}
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    in.enqueue,
		UpdateFunc: func(_, obj any) { in.enqueue(obj) },
		DeleteFunc: in.deleted,
	})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("watching the jobs' pods: %w", err)
	}
	factory.Start(ctx.Done())
	sctx, scancel := context.WithTimeout(ctx, wl.be.cfg.SyncTimeout)
	defer scancel()
	if !cache.WaitForCacheSync(sctx.Done(), inf.HasSynced) {
		in.Close()
		return nil, fmt.Errorf("listing the jobs' pods: not done after %v", wl.be.cfg.SyncTimeout)
	}
	in.done.Go(in.runReports)
	return in, nil
}

// trimPod drops what the informer never reads.
func trimPod(obj any) (any, error) {
	if p, ok := obj.(*corev1.Pod); ok {
		p.ManagedFields = nil
	}
	return obj, nil
}

func podRun(obj any) ([]string, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok || p.Annotations[RunKeyAnnotation] == "" {
		return nil, nil
	}
	return []string{p.Annotations[RunKeyAnnotation]}, nil
}

func (in *instances) enqueue(obj any) {
	if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
		in.queue.Add(key)
	}
}

// deleted keeps the last state of a pod deleted before its end was
// reported (someone removed the finalizer), so that it is reported all
// the same.
func (in *instances) deleted(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	key, err := cache.MetaNamespaceKeyFunc(p)
	if err != nil {
		return
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if !in.reported[p.UID] && hasExitFinalizer(p) {
		in.gone[key] = p
		in.queue.Add(key)
	}
	delete(in.reported, p.UID)
}

// runReports reports the ends of the queued pods, one at a time, until
// Close: a failed removal of the finalizer is tried again after a
// growing pause.
func (in *instances) runReports() {
	for {
		key, shutdown := in.queue.Get()
		if shutdown {
			return
		}
		err := in.report(key)
		switch {
		case in.ctx.Err() != nil:
		case err != nil:
			in.wl.log.Warn("reporting the end of a job's pod; trying again", "pod", key, "err", err)
			in.queue.AddRateLimited(key)
		default:
			in.queue.Forget(key)
		}
		in.queue.Done(key)
	}
}

// report sends the end of the pod of key once it has ended, then removes
// the pod's finalizer. A pod being deleted has ended when its grace
// period is over, even if its kubelet never says so (a node lost).
func (in *instances) report(key string) error {
	obj, exists, err := in.pods.GetByKey(key)
	if err != nil {
		return err
	}
	in.mu.Lock()
	p, gone := in.gone[key]
	in.mu.Unlock()
	if exists {
		p, gone = obj.(*corev1.Pod), false
	}
	if p == nil || !hasExitFinalizer(p) {
		return nil // reported by an earlier server, or not capblock's
	}
	end := podEnd(p, gone, in.wl.be.cfg.Now())
	if !end.ended {
		if end.recheck > 0 {
			in.queue.AddAfter(key, end.recheck)
		}
		return nil
	}
	in.mu.Lock()
	sent := in.reported[p.UID]
	in.mu.Unlock()
	if !sent {
		x, ok := podExit(p, end)
		verdict := backend.ReportEnd
		if ok {
			verdict = in.starts.Verdict(x.JobID, x.Instance)
		}
		switch {
		case verdict == backend.HoldEnd:
			return nil // queued again when its Start or Stop applies
		case !ok:
			in.wl.log.Warn("a pod of capblock's jobs names no run or instance; its end is not reported", "pod", key)
		case verdict == backend.DropEnd:
			in.wl.log.Info("a pod of a job's run ended before its instance started; the run was stopped meanwhile", "pod", key)
		default:
			select {
			case in.exits <- x:
			case <-in.ctx.Done():
				return in.ctx.Err() // the next server reports it
			}
		}
		in.mu.Lock()
		in.reported[p.UID] = true
		in.mu.Unlock()
	}
	if gone {
		in.mu.Lock()
		delete(in.gone, key)
		in.mu.Unlock()
		return nil
	}
	return in.release(p)
}

// release removes ExitFinalizer from p, leaving its other finalizers.
func (in *instances) release(p *corev1.Pod) error {
	patch := fmt.Appendf(nil, `{"metadata":{"$deleteFromPrimitiveList/finalizers":[%q]}}`, ExitFinalizer)
	_, err := in.wl.be.client.CoreV1().Pods(p.Namespace).Patch(in.ctx, p.Name, types.StrategicMergePatchType, patch,
		metav1.PatchOptions{FieldManager: fieldManager})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing the finalizer of pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	return nil
}

func hasExitFinalizer(p *corev1.Pod) bool { return slices.Contains(p.Finalizers, ExitFinalizer) }

// podExit is the exit that p's end reports: its run and instance from
// its annotations.
func podExit(p *corev1.Pod, end podEnding) (backend.InstanceExit, bool) {
	run := p.Annotations[RunKeyAnnotation]
	index, err := strconv.Atoi(p.Annotations[completionIndex])
	if run == "" || err != nil {
		return backend.InstanceExit{}, false
	}
	return backend.InstanceExit{JobID: run, Instance: index, Code: end.code, Err: end.err}, true
}

// Start makes the run's Indexed Job and its headless Service, if they are
// not made yet: the Job runs every instance of the run, so the start of
// its first instance makes it, and the others' find it (AlreadyExists is
// success). It returns once the Job is stored; the scheduler places its
// pods. From then on the end of the instance's pod is reported, even if
// it came before.
func (in *instances) Start(ctx context.Context, w backend.Workload) error {
	if err := in.start(ctx, w); err != nil {
		return err
	}
	in.starts.Start(w.Run, w.Rank)
	in.requeue(w.Run, w.Rank)
	return nil
}

func (in *instances) start(ctx context.Context, w backend.Workload) error {
	in.mu.Lock()
	made := in.made[w.Run]
	in.mu.Unlock()
	if made {
		return nil
	}
	if pods, err := in.pods.ByIndex(runIndex, w.Run); err == nil && len(pods) > 0 {
		in.markMade(w.Run) // made before a restart: its namespace may since have changed
		return nil
	}
	ns, err := in.wl.namespace(ctx, w.Team)
	if err != nil {
		return err
	}
	job, err := runJob(w, in.wl.spec(w, ns))
	if err != nil {
		return err
	}
	jobs := in.wl.be.client.BatchV1().Jobs(ns)
	got, err := jobs.Create(ctx, job, metav1.CreateOptions{FieldManager: fieldManager})
	if apierrors.IsAlreadyExists(err) {
		got, err = jobs.Get(ctx, job.Name, metav1.GetOptions{})
		if err == nil && got.Annotations[RunKeyAnnotation] != w.Run {
			return fmt.Errorf("job %s/%s is not run %s's but %q's", ns, job.Name, w.Run, got.Annotations[RunKeyAnnotation])
		}
	} else if err == nil {
		in.wl.log.Info("started a job's run as an Indexed Job", "job", w.JobID, "run", w.Run, "kubernetes job", ns+"/"+job.Name, "instances", w.WorldSize)
	}
	if err != nil {
		return fmt.Errorf("creating Job %s/%s of run %s: %w", ns, job.Name, w.Run, err)
	}
	_, err = in.wl.be.client.CoreV1().Services(ns).Create(ctx, runService(got), metav1.CreateOptions{FieldManager: fieldManager})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating Service %s/%s of run %s: %w", ns, job.Name, w.Run, err)
	}
	in.markMade(w.Run)
	return nil
}

func (in *instances) markMade(run string) {
	in.mu.Lock()
	in.made[run] = true
	in.mu.Unlock()
}

// stopTimeout bounds the API calls of one Stop.
const stopTimeout = 30 * time.Second

// Stop deletes the instance's pod with grace as its grace period (the
// kubelet sends SIGTERM, then SIGKILL after it), unless it has ended or
// is being deleted already. The Job counts the deletion as a failure and
// makes no other pod (backoffLimit 0). When the pod is not made yet (or
// the informer has not seen it yet), the run's Job is deleted instead, so
// that it never makes it. The Job of a run that ended stays until its TTL,
// its ended pods with it, for their logs. An instance stopped before its
// Start, in a run this Open started, never reports its end (starts.go).
func (in *instances) Stop(run string, instance int, grace time.Duration) error {
	ctx, cancel := context.WithTimeout(in.ctx, stopTimeout)
	defer cancel()
	in.starts.Stop(run, instance)
	in.requeue(run, instance)
	pods := in.instancePods(run, instance)
	if len(pods) == 0 {
		return in.deleteJobs(ctx, run)
	}
	secs := max(int64(grace/time.Second), 1) // 0 would delete the pod without waiting for its kubelet
	now := in.wl.be.cfg.Now()
	for _, p := range pods {
		if p.DeletionTimestamp != nil || podEnd(p, false, now).ended {
			continue
		}
		err := in.wl.be.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name,
			metav1.DeleteOptions{GracePeriodSeconds: &secs, Preconditions: &metav1.Preconditions{UID: &p.UID}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("stopping instance %d of run %s: deleting pod %s/%s: %w", instance, run, p.Namespace, p.Name, err)
		}
	}
	return nil
}

// instancePods are the informer's pods of one instance of a run.
func (in *instances) instancePods(run string, instance int) []*corev1.Pod {
	objs, err := in.pods.ByIndex(runIndex, run)
	if err != nil {
		return nil
	}
	var out []*corev1.Pod
	for _, obj := range objs {
		if p := obj.(*corev1.Pod); p.Annotations[completionIndex] == strconv.Itoa(instance) {
			out = append(out, p)
		}
	}
	return out
}

// deleteJobs deletes the run's Jobs, wherever they are; their pods go
// with them (each with its grace period).
func (in *instances) deleteJobs(ctx context.Context, run string) error {
	id, n, err := runNumber(run)
	if err != nil {
		return err
	}
	sel := JobLabel + "=" + labelSafe(id) + "," + RunLabel + "=" + strconv.Itoa(n)
	list, err := in.wl.be.client.BatchV1().Jobs(corev1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return fmt.Errorf("listing the Jobs of run %s: %w", run, err)
	}
	background := metav1.DeletePropagationBackground
	for _, j := range list.Items {
		if j.Annotations[RunKeyAnnotation] != run || j.DeletionTimestamp != nil {
			continue
		}
		err := in.wl.be.client.BatchV1().Jobs(j.Namespace).Delete(ctx, j.Name,
			metav1.DeleteOptions{PropagationPolicy: &background, Preconditions: &metav1.Preconditions{UID: &j.UID}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("deleting Job %s/%s of run %s: %w", j.Namespace, j.Name, run, err)
		}
	}
	return nil
}

// Adopt reports the pods of capblock's jobs that have not ended, being
// deleted or not: they still run. The ends of the others come on Exits.
func (in *instances) Adopt() ([]backend.RunningInstance, error) {
	now := in.wl.be.cfg.Now()
	var out []backend.RunningInstance
	for _, obj := range in.pods.List() {
		p := obj.(*corev1.Pod)
		if !hasExitFinalizer(p) || podEnd(p, false, now).ended {
			continue
		}
		if x, ok := podExit(p, podEnding{}); ok {
			out = append(out, backend.RunningInstance{Run: x.JobID, Instance: x.Instance})
			in.starts.Adopt(x.JobID, x.Instance)
		}
	}
	backend.SortRunning(out)
	return out, nil
}

// Exits reports each pod's end once (podEnd).
func (in *instances) Exits() <-chan backend.InstanceExit { return in.exits }

// Close stops the informer and the reporter, and leaves the pods as they
// are: the next Open adopts those that run and reports the others' ends.
func (in *instances) Close() error {
	in.once.Do(func() {
		in.cancel()
		in.queue.ShutDown()
		in.stop()
		in.done.Wait()
	})
	return nil
}

// podEnding is how a pod ended, or when to look again.
type podEnding struct {
	ended   bool
	code    int
	err     error
	recheck time.Duration // a pod being deleted: when its grace period is over
}

// Exit codes of pods that ended without their container's own.
const (
	// ExitKilled is the end of a pod taken away while its container ran
	// (a stop, an eviction, the Job's failure, its node lost), when no
	// exit code of the container was recorded: as a process killed by
	// SIGKILL.
	ExitKilled = 137
	// ExitNeverRan is the end of a pod that ended before its container
	// started: unknown, as a process that could not be watched.
	ExitNeverRan = -1
)

// podEnd says whether p has ended, and how, at now; gone says that p
// is its last state before it was deleted from the cluster.
//
//	Succeeded                                   0
//	Failed, its container terminated            the container's exit code
//	being deleted, its grace period not over    not ended: look again then
//	deleted (or its grace over), the container  the container's exit code
//	  terminated
//	failed or deleted otherwise                 ExitKilled if the container
//	                                            ran, else ExitNeverRan
func podEnd(p *corev1.Pod, gone bool, now time.Time) podEnding {
	term, ran := containerState(p)
	key := p.Namespace + "/" + p.Name
	switch {
	case p.Status.Phase == corev1.PodSucceeded:
		return podEnding{ended: true}
	case p.Status.Phase == corev1.PodFailed && term != nil:
		return podEnding{ended: true, code: int(term.ExitCode)}
	case p.Status.Phase == corev1.PodFailed:
		return lostPod(ran, fmt.Errorf("pod %s failed: %s %s", key, p.Status.Reason, p.Status.Message))
	case !gone && p.DeletionTimestamp == nil:
		return podEnding{}
	case !gone && now.Before(p.DeletionTimestamp.Time):
		return podEnding{recheck: p.DeletionTimestamp.Sub(now)}
	case term != nil:
		return podEnding{ended: true, code: int(term.ExitCode)}
	default:
		return lostPod(ran, fmt.Errorf("pod %s was deleted before its end was recorded", key))
	}
}

func lostPod(ran bool, err error) podEnding {
	if ran {
		return podEnding{ended: true, code: ExitKilled, err: err}
	}
	return podEnding{ended: true, code: ExitNeverRan, err: err}
}

// containerState is the job's container's end, if recorded, and whether
// it ever ran.
func containerState(p *corev1.Pod) (*corev1.ContainerStateTerminated, bool) {
	for _, c := range p.Status.ContainerStatuses {
		if c.Name != ContainerName {
			continue
		}
		if c.State.Terminated != nil {
			return c.State.Terminated, true
		}
		return nil, c.State.Running != nil || c.LastTerminationState.Terminated != nil
	}
	return nil, false
}
