package service

import (
	"context"
	"sync"
	"testing"
)

// runService runs svc.Run until the test ends or stop is called, and
// returns the context it runs with; stop cancels it and waits for Run to
// return, and may be called more than once.
func runService(t *testing.T, svc *Service) (ctx context.Context, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		svc.Run(ctx)
	}()
	stop = sync.OnceFunc(func() { cancel(); <-ran })
	t.Cleanup(stop)
	return ctx, stop
}
