// Package kube tests capblock on Kubernetes end to end, as an operator
// and a team see it: a real control plane (kubetest) with KWOK's nodes,
// capblock's rights applied from deploy/kubernetes, the built binary
// serving as that ServiceAccount, and the CLI and the cluster's API
// driving and checking it.
package kube

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"capblock/internal/testbin"
)

// buildBinary builds cmd/capblock once per test run.
func buildBinary(t testing.TB) string { return testbin.Capblock(t) }

// server is `capblock serve` run as a process, on the same database,
// addresses and flags at every start.
type server struct {
	t     *testing.T
	bin   string
	dir   string   // its database, admin token and logs
	url   string   // its API
	flags []string // beside --db and --listen
	cmd   *exec.Cmd
	exit  chan error
	logs  []string // one file per start
}

func newServer(t *testing.T, bin, dir string, flags ...string) *server {
	return &server{t: t, bin: bin, dir: dir, url: "http://" + freeAddr(t), flags: flags}
}

// start starts the server and waits until its API answers; its output
// goes to a log of its own, shown if the test fails.
func (s *server) start() {
	s.t.Helper()
	log := filepath.Join(s.dir, fmt.Sprintf("capblock-%d.log", len(s.logs)+1))
	out, err := os.Create(log)
	if err != nil {
		s.t.Fatal(err)
	}
	defer out.Close()
	s.logs = append(s.logs, log)
	args := append([]string{"serve", "--db", filepath.Join(s.dir, "capblock.db"), "--listen", strings.TrimPrefix(s.url, "http://")}, s.flags...)
	s.cmd = exec.Command(s.bin, args...)
	s.cmd.Stdout, s.cmd.Stderr = out, out
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	cmd, exit := s.cmd, make(chan error, 1)
	s.exit = exit
	go func() { exit <- cmd.Wait() }()
	if len(s.logs) == 1 {
		s.t.Cleanup(func() {
			s.kill()
			if s.t.Failed() {
				s.showLogs()
			}
		})
	}
	deadline := time.After(time.Minute)
	for {
		resp, err := http.Get(s.url + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case err := <-exit:
			exit <- err
			s.t.Fatalf("capblock serve exited at start: %v", err)
		case <-deadline:
			s.t.Fatal("capblock serve did not answer within a minute")
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// kill ends the server with SIGKILL, as a crash: nothing of it runs
// after.
func (s *server) kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	err := <-s.exit
	s.exit <- err
	s.cmd = nil
}

func (s *server) showLogs() {
	for _, log := range s.logs {
		data, err := os.ReadFile(log)
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		s.t.Logf("last lines of %s:\n%s", log, strings.Join(lines[max(0, len(lines)-40):], "\n"))
	}
}

// cli runs the capblock CLI as a user of its own (its login in a
// configuration directory of its own).
type cli struct {
	t   *testing.T
	bin string
	env []string
}

func newCLI(t *testing.T, bin string) *cli {
	home := t.TempDir()
	var env []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); !strings.HasPrefix(k, "CAPBLOCK_") && k != "HOME" && k != "XDG_CONFIG_HOME" {
			env = append(env, kv)
		}
	}
	return &cli{t: t, bin: bin, env: append(env, "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"))}
}

// run runs the CLI and returns its standard output; a non-zero exit
// fails the test.
func (c *cli) run(args ...string) string {
	c.t.Helper()
	out, errOut, err := c.try(args...)
	if err != nil {
		c.t.Fatalf("capblock %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

// try runs the CLI and returns its output and how it exited.
func (c *cli) try(args ...string) (stdout, stderr string, err error) {
	cmd := exec.Command(c.bin, args...)
	cmd.Env = c.env
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

// json runs the CLI with -o json and decodes its output into v.
func (c *cli) json(v any, args ...string) {
	c.t.Helper()
	out := c.run(append([]string{"-o", "json"}, args...)...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		c.t.Fatalf("capblock %s: decoding %q: %v", strings.Join(args, " "), out, err)
	}
}

// freeAddr returns a loopback address with a port nobody listens on.
func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
