package executor

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestRelativeStateDir: a state directory given relative to the working
// directory still records exit codes of jobs that run elsewhere.
func TestRelativeStateDir(t *testing.T) {
	base := t.TempDir()
	t.Chdir(base)
	e, err := New("state")
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	jobDir := filepath.Join(base, "job")
	if err := os.MkdirAll(jobDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Start(Spec{JobID: "j", Command: []string{"/bin/sh", "-c", "exit 3"}, Dir: jobDir, LogPath: filepath.Join(jobDir, "log")}); err != nil {
		t.Fatal(err)
	}
	select {
	case x := <-e.Exits():
		if x.Code != 3 || x.Err != nil {
			t.Fatalf("exit %+v, want code 3", x)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no exit")
	}
	if log, _ := readAll(t, filepath.Join(jobDir, "log")); len(log) != 0 {
		t.Fatalf("the shim complained: %s", log)
	}
}

// TestRelativeJobPaths: a working directory and a log given relative to the
// server's working directory mean the same for the command and its shim,
// which run elsewhere.
func TestRelativeJobPaths(t *testing.T) {
	base := t.TempDir()
	t.Chdir(base)
	e, _ := newTestExecutor(t)
	if err := os.Mkdir("job", 0o755); err != nil {
		t.Fatal(err)
	}
	s := Spec{JobID: "j", Command: []string{"/bin/sh", "-c", "pwd"}, Dir: "job", LogPath: filepath.Join("logs", "j.log")}
	start(t, e, s)
	if x := nextExit(t, e); x.Code != 0 || x.Err != nil {
		t.Fatalf("exit %+v, want 0", x)
	}
	if log, _ := readAll(t, s.LogPath); log != filepath.Join(base, "job")+"\n" {
		t.Errorf("the command ran in %q, want %s", log, filepath.Join(base, "job"))
	}
}
