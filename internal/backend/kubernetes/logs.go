package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// defaultLogRead is what a read without a limit returns at most, as the
// local engine's.
const defaultLogRead = 64 << 10

// maxLogTail bounds what a read from the end keeps in memory: far more
// than a kubelet keeps of a log.
const maxLogTail = 1 << 30

// ReadLog reads an instance's log through the API server: the log of the
// job's container in the instance's pod of the job's newest run that has
// one. Offsets count the bytes of that pod's log as its kubelet keeps it:
// a new run's pod starts again at 0, and a log the kubelet rotated has
// lost its beginning. The log API reads from the start or by time, not
// from a byte offset, so a read at offset n fetches n+limit bytes
// (limitBytes) and drops the first n; a negative offset fetches the
// whole log (at most the kubelet's containerLogMaxSize, 10 MiB by
// default) and keeps its end. Following a log (offset after offset) thus
// costs what it has read so far at each call. Any replica may read: it
// lists the job's pods from the API, not from the leader's informer.
func (wl *Workloads) ReadLog(ctx context.Context, jobID string, instance int, offset int64, limit int) ([]byte, int64, error) {
	if limit <= 0 {
		limit = defaultLogRead
	}
	p, err := wl.logPod(ctx, jobID, instance)
	if err != nil {
		return nil, 0, err
	}
	if p == nil {
		return []byte{}, 0, nil // not started yet
	}
	if _, ran := containerState(p); !ran {
		return []byte{}, 0, nil // no log before the container starts
	}
	opts := &corev1.PodLogOptions{Container: ContainerName}
	end := offset + int64(limit) // where a read from offset stops
	if end < offset {
		end = math.MaxInt64
	}
	if offset >= 0 {
		opts.LimitBytes = &end
	}
	rc, err := wl.be.client.CoreV1().Pods(p.Namespace).GetLogs(p.Name, opts).Stream(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("reading the log of pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	defer rc.Close()
	if offset >= 0 {
		data, err := io.ReadAll(io.LimitReader(rc, end))
		if err != nil {
			return nil, 0, fmt.Errorf("reading the log of pod %s/%s: %w", p.Namespace, p.Name, err)
		}
		if int64(len(data)) <= offset {
			return []byte{}, offset, nil
		}
		data = data[offset:]
		return data, offset + int64(len(data)), nil
	}
	keep := int64(maxLogTail)
	if offset > -keep {
		keep = -offset
	}
	total, tail, err := readTail(rc, keep)
	if err != nil {
		return nil, 0, fmt.Errorf("reading the log of pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	start := total - int64(len(tail)) // max(total+offset, 0)
	data := tail[:min(len(tail), limit)]
	return data, start + int64(len(data)), nil
}

// readTail reads r to its end and returns how many bytes it held and the
// last n of them.
func readTail(r io.Reader, n int64) (int64, []byte, error) {
	var (
		total int64
		buf   []byte
		chunk = make([]byte, 32<<10)
	)
	for {
		k, err := r.Read(chunk)
		total += int64(k)
		buf = append(buf, chunk[:k]...)
		if int64(len(buf)) > 2*n {
			buf = append(buf[:0], buf[int64(len(buf))-n:]...)
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, nil, err
		}
	}
	if int64(len(buf)) > n {
		buf = buf[int64(len(buf))-n:]
	}
	return total, buf, nil
}

// logPod is the pod of the job's instance in the newest run that has
// one, or nil.
func (wl *Workloads) logPod(ctx context.Context, jobID string, instance int) (*corev1.Pod, error) {
	list, err := wl.be.client.CoreV1().Pods(corev1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: JobLabel + "=" + labelSafe(jobID)})
	if err != nil {
		return nil, fmt.Errorf("listing the pods of job %s: %w", jobID, err)
	}
	var best *corev1.Pod
	bestRun := -1
	for i := range list.Items {
		p := &list.Items[i]
		id, run, err := runNumber(p.Annotations[RunKeyAnnotation])
		if err != nil || id != jobID || p.Annotations[completionIndex] != strconv.Itoa(instance) {
			continue
		}
		if run > bestRun || (run == bestRun && best.CreationTimestamp.Before(&p.CreationTimestamp)) {
			best, bestRun = p, run
		}
	}
	return best, nil
}
