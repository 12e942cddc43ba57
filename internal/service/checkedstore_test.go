package service

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"

	"capblock/internal/store"
)

//go:generate go run gen_checkedstore.go

// TestMain runs the package's tests with the service's lock tracked and
// every service's store checked (checkStore): a store method that runs
// on a goroutine holding a service's lock exclusively is a violation,
// and the run fails with each one and where it was called from.
//
// Benchmarks (-bench) run without either: they measure the service as it
// serves, and the tracking reads a goroutine's stack at every lock and
// store call (a tenth of a purchase's CPU).
func TestMain(m *testing.M) {
	flag.Parse()
	if flag.Lookup("test.bench").Value.String() == "" {
		lockTracking.Store(true)
		checkStore = func(st store.Full) store.Full { return checkedStoreOf(st, &allViolations) }
	}
	code := m.Run()
	if vs := allViolations.list(); len(vs) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: %d store calls under the service's exclusive lock:\n", len(vs))
		for _, v := range vs {
			fmt.Fprintf(os.Stderr, "\n%s\n", v)
		}
		code = 1
	}
	os.Exit(code)
}

// allViolations are the store calls under the exclusive lock of every
// test of the package.
var allViolations lockViolations

// lockViolations records store calls made under the exclusive lock,
// each distinct call (method and callers) once.
type lockViolations struct {
	mu   sync.Mutex
	seen map[string]bool
	all  []string
}

func (v *lockViolations) add(violation string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.seen[violation] {
		return
	}
	if v.seen == nil {
		v.seen = map[string]bool{}
	}
	v.seen[violation] = true
	v.all = append(v.all, violation)
}

func (v *lockViolations) list() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]string(nil), v.all...)
}

// checkedStore passes every call on to full, after it checks that the
// calling goroutine does not hold a service's lock exclusively. Its
// methods are generated (checkedstore_gen_test.go), one for each method
// of store.Full, so that it covers a method added there as soon as
// go generate runs, and the package's tests do not compile until then.
type checkedStore struct {
	full store.Full
	logs []*lockViolations
}

// checkedCoordinator is a checkedStore over a store that replicas share.
type checkedCoordinator struct {
	*checkedStore
	co store.Coordinator
}

var (
	_ store.Full        = (*checkedStore)(nil)
	_ store.Coordinator = (*checkedCoordinator)(nil)
)

// checkedStoreOf wraps st, unless it is checked already, recording its
// violations in logs and in allViolations; it keeps st a Coordinator
// when it is one.
func checkedStoreOf(st store.Full, logs ...*lockViolations) store.Full {
	switch st.(type) {
	case *checkedStore, *checkedCoordinator:
		return st
	}
	c := &checkedStore{full: st, logs: append(logs, &allViolations)}
	if co, ok := st.(store.Coordinator); ok {
		return &checkedCoordinator{checkedStore: c, co: co}
	}
	return c
}

func (w *checkedStore) check(method string) {
	if !heldExclusively() {
		return
	}
	violation := fmt.Sprintf("store.%s under the exclusive lock, called from:\n%s", method, callers())
	for _, l := range w.logs {
		l.add(violation)
	}
}

// callers lists the functions that called the store, with their lines,
// below the checking ones and above the test's.
func callers() string {
	pcs := make([]uintptr, 32)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(4, pcs)])
	var b strings.Builder
	for {
		f, more := frames.Next()
		if strings.HasPrefix(f.Function, "testing.") {
			break
		}
		fmt.Fprintf(&b, "\t%s\n\t\t%s:%d\n", f.Function, filepath.Base(f.File), f.Line)
		if !more {
			break
		}
	}
	return b.String()
}

// TestCheckedStoreChecksEveryMethod: each method of store.Full and
// store.Coordinator, called with the lock held exclusively, is recorded
// by its name; called with the lock held shared, or not at all, it is
// not.
func TestCheckedStoreChecksEveryMethod(t *testing.T) {
	var mu indexLock
	var got lockViolations
	st := &checkedCoordinator{checkedStore: &checkedStore{logs: []*lockViolations{&got}}}
	call := func(m reflect.Method) {
		defer func() { _ = recover() }() // the store under it is nil
		args := make([]reflect.Value, m.Type.NumIn())
		for i := range args {
			args[i] = reflect.Zero(m.Type.In(i))
		}
		reflect.ValueOf(st).MethodByName(m.Name).Call(args)
	}
	var want []string
	for _, iface := range []reflect.Type{reflect.TypeFor[store.Full](), reflect.TypeFor[store.Coordinator]()} {
		for m := range iface.Methods() {
			mu.RLock()
			call(m)
			mu.RUnlock()
			call(m)
			mu.Lock()
			call(m)
			mu.Unlock()
			want = append(want, "store."+m.Name+" ")
		}
	}
	vs := got.list()
	if len(vs) != len(want) {
		t.Fatalf("%d violations recorded, want %d (one for each method):\n%s", len(vs), len(want), strings.Join(vs, "\n"))
	}
	for i, v := range vs {
		if !strings.HasPrefix(v, want[i]) {
			t.Errorf("violation %d is %q, want one of %s", i, strings.SplitN(v, "\n", 2)[0], want[i])
		}
	}
}

// TestCheckedStoreGenerated: checkedstore_gen_test.go is what its
// generator writes from the store package as it is now.
func TestCheckedStoreGenerated(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool to run the generator")
	}
	out := filepath.Join(t.TempDir(), "gen_test.go")
	cmd := exec.Command(goTool, "run", "gen_checkedstore.go", "-o", out)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("running the generator: %v\n%s", err, msg)
	}
	want, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("checkedstore_gen_test.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Error("checkedstore_gen_test.go is out of date with the store package: run go generate ./internal/service")
	}
}
