package kubernetes

import "strconv"

// requeue queues the pods of one instance of a run, those deleted before
// their end was reported too, whose end may have waited for its Start.
func (in *instances) requeue(run string, instance int) {
	for _, p := range in.instancePods(run, instance) {
		in.enqueue(p)
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	for key, p := range in.gone {
		if p.Annotations[RunKeyAnnotation] == run && p.Annotations[completionIndex] == strconv.Itoa(instance) {
			in.queue.Add(key)
		}
	}
}
