package kubernetes_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"capblock/internal/kubetest"
)

// The jobs' tests need pods that run until the test ends them, with an
// exit code of its choosing, and logs to read; KWOK's fast stages, which
// kubetest runs, complete a Job's pod as soon as it runs, and KWOK serves
// no logs unless told. startJobsCluster therefore runs kubetest's
// binaries with stages of its own (testdata/kwok-stages): a pod of a Job
// runs until annotated exitCodeAnnotation, and then ends with that code;
// and KWOK serves, as every fake node's kubelet, the log jobLog for every
// container (on loopback, over TLS, as the API server expects of a
// kubelet).
const exitCodeAnnotation = "kwok.capblock.io/exit-code"

// jobLog is every container's log, in the CRI format that KWOK reads, and
// jobLogText what the API serves of it.
const (
	jobLog = "2026-01-01T00:00:00.000000000Z stdout F rank up\n" +
		"2026-01-01T00:00:01.000000000Z stdout F step 1 loss 0.5\n" +
		"2026-01-01T00:00:02.000000000Z stderr F done\n"
	jobLogText = "rank up\nstep 1 loss 0.5\ndone\n"
)

// jobsCluster is a test cluster whose KWOK runs Job pods until told to
// end them, and serves their log as the kubelet on kubeletPort.
type jobsCluster struct {
	*testCluster
	kubeletPort int
}

// startJobsCluster starts a cluster as startCluster does, with KWOK
// playing kubelets that run Job pods until told and serve logs.
func startJobsCluster(t *testing.T) *jobsCluster {
	t.Helper()
	bin := kubeBinaries()
	if bin == "" {
		return &jobsCluster{testCluster: startCluster(t)} // skips, or fails under CI
	}
	dir := t.TempDir()
	port := freePort(t)
	stages := filepath.Join(dir, "kwok-stages")
	if err := os.Mkdir(stages, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"} {
		if err := os.Symlink(filepath.Join(bin, name), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	// 1. kubetest's node stages and pod stages, but for pod-complete.
	theirs, err := filepath.Glob(filepath.Join(bin, "kwok-stages", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range theirs {
		if filepath.Base(f) != "pod-complete.yaml" {
			if err := os.Symlink(f, filepath.Join(stages, filepath.Base(f))); err != nil {
				t.Fatal(err)
			}
		}
	}
	ours, err := filepath.Glob("testdata/kwok-stages/*.yaml")
	if err != nil || len(ours) == 0 {
		t.Fatalf("no stages in testdata/kwok-stages: %v", err)
	}
	for _, f := range ours {
		abs, _ := filepath.Abs(f)
		if err := os.Symlink(abs, filepath.Join(stages, filepath.Base(f))); err != nil {
			t.Fatal(err)
		}
	}
	// 2. KWOK's kubelet server, and the log it serves. A configuration
	// file replaces KWOK's defaults, which it therefore repeats.
	cert, key := writeServingCert(t, dir)
	logFile := filepath.Join(dir, "train.log")
	if err := os.WriteFile(logFile, []byte(jobLog), 0o644); err != nil {
		t.Fatal(err)
	}
	conf := fmt.Sprintf(`apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  cidr: 10.0.0.0/24
  podPlayStageParallelism: 4
  nodePlayStageParallelism: 4
  nodeLeaseParallelism: 4
  nodeLeaseDurationSeconds: 40
  podsOnNodeSyncParallelism: 1
  enableDebuggingHandlers: true
  nodeIP: 127.0.0.1
  nodePort: %d
  serverAddress: 127.0.0.1:%d
  tlsCertFile: %s
  tlsPrivateKeyFile: %s
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterLogs
metadata:
  name: jobs
spec:
  logs:
  - logsFile: %s
`, port, port, cert, key, logFile)
	if err := os.WriteFile(filepath.Join(stages, "kubelet-server.yaml"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CAPBLOCK_KUBE_BIN", dir)
	return &jobsCluster{testCluster: startCluster(t), kubeletPort: port}
}

// kubeBinaries is the folder of kubetest's binaries, found as kubetest
// finds it, or "" when they are not built.
func kubeBinaries() string {
	if dir := os.Getenv("CAPBLOCK_KUBE_BIN"); dir != "" {
		return dir
	}
	cache := os.Getenv("CAPBLOCK_CACHE")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return ""
		}
		cache = filepath.Join(home, ".cache", "capblock")
	}
	found, _ := filepath.Glob(filepath.Join(cache, "kube", kubetest.KubeVersion+"-*", "bin"))
	for _, dir := range found {
		if _, err := os.Stat(filepath.Join(dir, "kwok-stages")); err == nil {
			return dir
		}
	}
	return ""
}

// addJobNodes adds n 8-GPU nodes in zone-a whose kubelet, as the API
// server reaches it, is KWOK's server: the API server takes a node's
// Hostname address first, which for a fake node resolves nowhere.
func (c *jobsCluster) addJobNodes(t *testing.T, n int) []string {
	t.Helper()
	names, err := c.AddGPUNodes(t.Context(), n, 8, "zone-a", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		c.updateStatus(t, name, func(node *corev1.Node) {
			node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}, {Type: corev1.NodeHostName, Address: "localhost"}}
			node.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(c.kubeletPort)
		})
	}
	return names
}

// endPod makes KWOK end the pod's container with code.
func (c *jobsCluster) endPod(t *testing.T, p corev1.Pod, code int) {
	t.Helper()
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:"%d"}}}`, exitCodeAnnotation, code)
	if _, err := c.admin.CoreV1().Pods(p.Namespace).Patch(t.Context(), p.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// writeServingCert writes a self-signed certificate for loopback: the
// API server does not check a kubelet's certificate unless told to.
func writeServingCert(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kwok"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "kubelet.crt"), filepath.Join(dir, "kubelet.key")
	for path, block := range map[string]*pem.Block{certFile: {Type: "CERTIFICATE", Bytes: der}, keyFile: {Type: "EC PRIVATE KEY", Bytes: keyDER}} {
		if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return certFile, keyFile
}
