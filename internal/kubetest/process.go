package kubetest

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// process is one component running as a child in its own process group.
type process struct {
	name string
	log  string // path of its stdout and stderr
	cmd  *exec.Cmd
	done chan struct{} // closed when it has exited and been reaped
	err  error         // why it exited, once done is closed
}

// run starts the component name from folder bin, its output in
// <dir>/<name>.log. It dies with the test process (Pdeathsig) even when a
// test times out and no cleanup runs.
func (c *Cluster) run(bin, name string, args ...string) error {
	p := &process{name: name, log: filepath.Join(c.dir, name+".log"), done: make(chan struct{})}
	out, err := os.Create(p.log)
	if err != nil {
		return fmt.Errorf("creating %s log: %w", name, err)
	}
	defer out.Close()
	p.cmd = exec.Command(filepath.Join(bin, name), args...)
	p.cmd.Dir = c.dir
	p.cmd.Env = append(os.Environ(), "HOME="+c.dir) // no user's ~/.kube or ~/.kwok
	p.cmd.Stdout, p.cmd.Stderr = out, out
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", name, err)
	}
	c.procs = append(c.procs, p)
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	return nil
}

// stop kills every component's process group, the last started first
// (their data is thrown away, so nothing needs a clean shutdown), and
// reaps them.
func (c *Cluster) stop() {
	for i := len(c.procs) - 1; i >= 0; i-- {
		p := c.procs[i]
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// exited returns an error naming the first component that has exited.
func (c *Cluster) exited() error {
	for _, p := range c.procs {
		select {
		case <-p.done:
			return fmt.Errorf("%s exited: %v (log in %s)", p.name, p.err, p.log)
		default:
		}
	}
	return nil
}

// waitHealthy polls url until it answers 200, a component exits, or ctx
// ends. The API server is asked with the admin token and checked against
// the CA; the other components' serving certificates are self-signed.
func (c *Cluster) waitHealthy(ctx context.Context, url string, apiServer bool) error {
	tlsConfig := &tls.Config{InsecureSkipVerify: !apiServer}
	if apiServer {
		tlsConfig.RootCAs = x509.NewCertPool()
		tlsConfig.RootCAs.AppendCertsFromPEM(c.CA)
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig}}
	defer client.CloseIdleConnections()
	return c.poll(ctx, "waiting for "+url, func() (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		if apiServer {
			req.Header.Set("Authorization", "Bearer "+c.AdminToken)
		}
		resp, err := client.Do(req)
		if err != nil {
			return false, nil // not listening yet
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
}

// poll calls done every 100 ms until it reports true or an error, a
// component exits, or ctx ends. A real cluster gives no event to wait on
// for these states.
func (c *Cluster) poll(ctx context.Context, what string, done func() (bool, error)) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, err := done()
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if ok {
			return nil
		}
		if err := c.exited(); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", what, ctx.Err())
		case <-tick.C:
		}
	}
}

// logTails logs the end of each component's log, to see why a test failed.
func (c *Cluster) logTails(tb testing.TB) {
	for _, p := range c.procs {
		b, err := os.ReadFile(p.log)
		if err != nil {
			tb.Logf("reading %s log: %v", p.name, err)
			continue
		}
		tb.Logf("last lines of %s:\n%s", p.log, tail(b, 30))
	}
}

// tail returns the last n lines of b.
func tail(b []byte, n int) []byte {
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	return bytes.Join(lines[max(0, len(lines)-n):], []byte("\n"))
}

// freePorts returns n loopback TCP ports that were free a moment ago.
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		defer l.Close() // held until all are chosen, so they differ
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
