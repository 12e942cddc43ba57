// Package kubetest runs a real Kubernetes control plane for a test: etcd,
// kube-apiserver (TLS, token and ServiceAccount authentication, RBAC),
// kube-controller-manager, kube-scheduler, and KWOK to play the kubelet of
// fake nodes. They run as child processes in the test's temporary
// directory, from binaries that scripts/kube-cluster-build.sh builds once
// into a cache outside the clone, and stop when the test ends.
//
//	func TestX(t *testing.T) {
//		c := kubetest.Start(t, kubetest.Options{})
//		names, err := c.AddGPUNodes(ctx, 4, 8, "zone-a", nil)
//		cs := kubernetes.NewForConfigOrDie(c.AdminConfig())
//		…
//	}
//
// Without the binaries the test skips, except under CI=true, where it
// fails: CI must run it (.ci/run calls the build script).
package kubetest

import (
	"capblock/internal/testproc"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// The versions that scripts/kube-cluster-build.sh builds; a test checks
// that the two agree.
const (
	KubeVersion = "v1.36.3"
	etcdVersion = "v3.6.16"
	kwokVersion = "v0.8.0"
)

// ErrNoBinaries is the reason that tests skip when the control plane has
// not been built.
var ErrNoBinaries = errors.New("Kubernetes binaries not found; run scripts/kube-cluster-build.sh")

// binaries are the files that Start needs in the binary folder.
var binaries = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "kwok-stages"}

// Options tune a cluster; the zero value is a good default.
type Options struct {
	// StartTimeout bounds the wait for the control plane to be ready
	// (default 90 s: a shared two-core machine can be slow).
	StartTimeout time.Duration
	// PodsRunUntilEnded keeps every pod Running until the test ends it
	// (EndPod), and ends it then with the code it was given. Without
	// it, KWOK ends a Job's pod with 0 as soon as it runs (its
	// pod-complete stage, which this one replaces).
	PodsRunUntilEnded bool
	// Stages are more KWOK configuration files (Stages, ClusterLogs, a
	// KwokConfiguration), given to KWOK after the built-in stages; a
	// file named as a built-in stage (pod-complete.yaml) replaces it.
	Stages []string
}

// Cluster is one running control plane.
type Cluster struct {
	URL        string // the API server, https://127.0.0.1:<port>
	CA         []byte // PEM of the CA that signed the API server's certificate
	AdminToken string // a bearer token in group system:masters
	Kubeconfig string // path of a kubeconfig file for the admin

	dir   string
	procs testproc.Group

	mu    sync.Mutex
	nodes int // fake nodes added so far, to name the next ones
}

// Start starts a cluster for tb and stops it when tb ends. It skips tb when
// the binaries are missing, unless CI=true.
func Start(tb testing.TB, opts Options) *Cluster {
	tb.Helper()
	bin, err := findBinaries()
	if err != nil {
		if os.Getenv("CI") != "true" {
			tb.Skip(err.Error())
		}
		tb.Fatal(err)
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 90 * time.Second
	}
	c := &Cluster{dir: tb.TempDir()}
	tb.Cleanup(func() {
		if tb.Failed() {
			c.logTails(tb)
		}
		c.stop()
	})
	ctx, cancel := context.WithTimeout(tb.Context(), opts.StartTimeout)
	defer cancel()
	if err := c.start(ctx, bin, opts); err != nil {
		tb.Fatalf("starting Kubernetes: %v", err)
	}
	return c
}

// findBinaries returns the folder of the binaries: $CAPBLOCK_KUBE_BIN, or
// else the build script's cache.
func findBinaries() (string, error) {
	dir := os.Getenv("CAPBLOCK_KUBE_BIN")
	if dir == "" {
		cache := os.Getenv("CAPBLOCK_CACHE")
		if cache == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return "", fmt.Errorf("finding the cache: %w", err)
			}
			cache = filepath.Join(home, ".cache", "capblock")
		}
		dir = filepath.Join(cache, "kube", cacheKey(), "bin")
	}
	for _, name := range binaries {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return "", fmt.Errorf("%w (no %s in %s)", ErrNoBinaries, name, dir)
		}
	}
	return dir, nil
}

// cacheKey names the cache folder of one set of versions.
func cacheKey() string {
	return KubeVersion + "-etcd" + etcdVersion + "-kwok" + kwokVersion
}

// start writes the credentials, then starts the components in order, each
// once the one it needs is ready.
func (c *Cluster) start(ctx context.Context, bin string, opts Options) error {
	// 1. Certificates, keys, the admin token and its kubeconfig.
	pki, err := writePKI(c.dir)
	if err != nil {
		return err
	}
	c.CA = pki.caPEM
	c.AdminToken, err = randomToken()
	if err != nil {
		return err
	}
	tokens := filepath.Join(c.dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte(c.AdminToken+",admin,admin,system:masters\n"), 0o600); err != nil {
		return fmt.Errorf("writing token file: %w", err)
	}
	ports, err := testproc.FreePorts(5)
	if err != nil {
		return err
	}
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	c.URL = fmt.Sprintf("https://127.0.0.1:%d", ports[2])
	c.Kubeconfig = filepath.Join(c.dir, "admin.kubeconfig")
	if err := c.writeKubeconfig(); err != nil {
		return err
	}
	// 2. etcd, then the API server on it.
	if err := c.run(bin, "etcd", etcdArgs(c.dir, etcdURL, ports[1])...); err != nil {
		return err
	}
	if err := c.waitHealthy(ctx, etcdURL+"/health", false); err != nil {
		return err
	}
	if err := c.run(bin, "kube-apiserver", apiServerArgs(c.dir, pki, etcdURL, ports[2], tokens)...); err != nil {
		return err
	}
	if err := c.waitHealthy(ctx, c.URL+"/readyz", true); err != nil {
		return err
	}
	// 3. The controllers, the scheduler and KWOK, all through the admin
	// kubeconfig.
	if err := c.run(bin, "kube-controller-manager", controllerManagerArgs(c.dir, pki, c.Kubeconfig, ports[3])...); err != nil {
		return err
	}
	if err := c.run(bin, "kube-scheduler", schedulerArgs(c.dir, c.Kubeconfig, ports[4])...); err != nil {
		return err
	}
	stages, err := c.kwokStages(bin, opts)
	if err != nil {
		return err
	}
	if err := c.run(bin, "kwok", kwokArgs(c.Kubeconfig, stages)...); err != nil {
		return err
	}
	// 4. Ready: both controllers answer, and the default ServiceAccount
	// that pods need exists.
	for _, port := range ports[3:5] {
		if err := c.waitHealthy(ctx, fmt.Sprintf("https://127.0.0.1:%d/healthz", port), false); err != nil {
			return err
		}
	}
	return c.waitDefaultServiceAccount(ctx)
}

func (c *Cluster) writeKubeconfig() error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kubetest"] = &clientcmdapi.Cluster{Server: c.URL, CertificateAuthorityData: c.CA}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: c.AdminToken}
	cfg.Contexts["kubetest"] = &clientcmdapi.Context{Cluster: "kubetest", AuthInfo: "admin"}
	cfg.CurrentContext = "kubetest"
	if err := clientcmd.WriteToFile(*cfg, c.Kubeconfig); err != nil {
		return fmt.Errorf("writing kubeconfig: %w", err)
	}
	return nil
}

// AdminConfig returns a client configuration for the admin (system:masters).
func (c *Cluster) AdminConfig() *rest.Config {
	return c.config(c.AdminToken)
}

// config returns a client configuration for a bearer token, with rate
// limits raised for tests.
func (c *Cluster) config(token string) *rest.Config {
	return &rest.Config{
		Host:            c.URL,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: c.CA},
		QPS:             100,
		Burst:           200,
	}
}

func randomToken() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("making a token: %w", err)
	}
	return hex.EncodeToString(b), nil
}
