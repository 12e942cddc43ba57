package kubetest

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// Eventually polls done every 50 ms until it holds, for at most 30 s,
// failing the test with the last error done returned: capblock, the
// controllers and KWOK act shortly after a change, and a cluster gives no
// event to wait on for most of the states tests wait for.
func Eventually(t testing.TB, what string, done func() (bool, error)) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		ok, err := done()
		last = err
		return ok, nil
	})
	if err != nil {
		t.Fatalf("waiting until %s: %v (last error: %v)", what, err, last)
	}
}

// Creator is a typed client's Create.
type Creator[T any] interface {
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
}

// Create creates obj through c.
func Create[T any](ctx context.Context, c Creator[T], obj T) error {
	_, err := c.Create(ctx, obj, metav1.CreateOptions{})
	return err
}
