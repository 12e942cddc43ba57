package testbin

import (
	"bufio"
	"os/exec"
	"regexp"
	"testing"
	"time"
)

// ListenLine matches the log line where `capblock serve` says where it
// listens (on 127.0.0.1:0, a port of the kernel's choice); its group is
// the URL.
var ListenLine = regexp.MustCompile(`url=(http://127\.0\.0\.1:\d+)`)

// Serve starts cmd, a `capblock serve` with --listen 127.0.0.1:0 whose
// stderr is not taken, kills it when the test ends, and returns the URL it
// says it listens on, failing the test when it says nothing within wait.
func Serve(t testing.TB, cmd *exec.Cmd, wait time.Duration) string {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := ListenLine.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
	}()
	select {
	case url := <-found:
		return url
	case <-time.After(wait):
		t.Fatalf("the server did not say where it listens within %s", wait)
		return ""
	}
}
