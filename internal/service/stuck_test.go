package service

import (
	"strings"
	"sync"
	"testing"
	"time"
)

// TestStuckReplicaIsNotReady: while a decision holds the index's lock
// past the bound, the replica says so on Ready and gives the lead up;
// once the lock is free again it is ready and leads again.
func TestStuckReplicaIsNotReady(t *testing.T) {
	svc := newPlanEnv(t).svc
	svc.probe.after = 300 * time.Millisecond
	ctx, _ := runService(t, svc)
	waitFor(t, 10*time.Second, "the service to lead", svc.Leading)
	if err := svc.Ready(ctx); err != nil {
		t.Fatalf("Ready before anything is stuck: %v", err)
	}

	// A decision that does not end, on a goroutine of its own.
	held, free := make(chan struct{}), make(chan struct{})
	go func() {
		svc.mu.Lock()
		close(held)
		<-free
		svc.mu.Unlock()
	}()
	<-held
	unlock := sync.OnceFunc(func() { close(free) })
	defer unlock()
	waitFor(t, 10*time.Second, "Ready to say the replica is stuck", func() bool {
		err := svc.Ready(ctx)
		return err != nil && strings.Contains(err.Error(), "index lock has not been free")
	})
	waitFor(t, 10*time.Second, "the stuck replica to give up the lead", func() bool { return !svc.Leading() })
	unlock()

	waitFor(t, 10*time.Second, "Ready once the lock is free", func() bool { return svc.Ready(ctx) == nil })
	waitFor(t, 10*time.Second, "the replica to lead again", svc.Leading)
}
