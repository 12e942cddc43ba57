package kubetest

import (
	"capblock/internal/testproc"
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// run starts the component name from folder bin, its output in
// <dir>/<name>.log, without the user's ~/.kube or ~/.kwok.
func (c *Cluster) run(bin, name string, args ...string) error {
	_, err := c.procs.Start(name, filepath.Join(bin, name), c.dir, filepath.Join(c.dir, name+".log"),
		append(os.Environ(), "HOME="+c.dir), args...)
	return err
}

// stop kills and reaps every component.
func (c *Cluster) stop() { c.procs.Stop() }

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

// poll waits for done (testproc.Group.Poll).
func (c *Cluster) poll(ctx context.Context, what string, done func() (bool, error)) error {
	return c.procs.Poll(ctx, what, done)
}

// logTails logs the end of each component's log, to see why a test failed.
func (c *Cluster) logTails(tb testing.TB) {
	for _, p := range c.procs.Procs() {
		b, err := os.ReadFile(p.Log)
		if err != nil {
			tb.Logf("reading %s log: %v", p.Name, err)
			continue
		}
		tb.Logf("last lines of %s:\n%s", p.Log, testproc.Tail(b, 30))
	}
}
