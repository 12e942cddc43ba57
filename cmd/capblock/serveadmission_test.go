package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientset "k8s.io/client-go/kubernetes"

	"capblock/internal/admission"
	"capblock/internal/kubetest"
)

// TestServeBadAdmissionFlags: an admission flag that cannot work is one
// line saying why, exit status 2, before anything is opened.
func TestServeBadAdmissionFlags(t *testing.T) {
	kube := []string{"--backend", "kubernetes", "--kubeconfig", "kube.yaml"}
	tls := []string{"--admission-tls-cert", "tls.crt", "--admission-tls-key", "tls.key"}
	tests := map[string]struct {
		args []string
		want string
	}{
		"on the sim":               {[]string{"--admission-listen", ":8443"}, "--admission-listen and the other --admission flags need --backend kubernetes"},
		"exempt on the sim":        {[]string{"--admission-exempt-namespaces", "monitoring"}, "need --backend kubernetes"},
		"no certificate":           {append(kube, "--admission-listen", ":8443"), "--admission-listen needs --admission-tls-cert and --admission-tls-key"},
		"no key":                   {append(kube, "--admission-listen", ":8443", "--admission-tls-cert", "tls.crt"), "needs --admission-tls-cert and --admission-tls-key"},
		"a certificate, no listen": {append(kube, tls...), "--admission-tls-cert, --admission-tls-key and --admission-exempt-namespaces need --admission-listen"},
		"not a namespace":          {append(append(kube, tls...), "--admission-listen", ":8443", "--admission-exempt-namespaces", "kube-system,Kube_System"), `--admission-exempt-namespaces: "Kube_System" is not a namespace's name`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			db := t.TempDir() + "/capblock.db"
			got := runApp(t.Context(), nil, append([]string{"serve", "--db", db, "--listen", "127.0.0.1:0"}, tc.args...)...)
			if got.code != 2 || !strings.Contains(got.stderr, tc.want) || strings.Count(got.stderr, "\n") != 1 {
				t.Errorf("serve %v: exit %d, stderr %q; want 2 and one line with %q", tc.args, got.code, got.stderr, tc.want)
			}
			if _, err := os.Stat(db); err == nil {
				t.Errorf("serve %v created %s before refusing its flags", tc.args, db)
			}
		})
	}
}

// TestDeploymentArgs: the arguments that deploy/kubernetes/deployment.yaml
// gives serve are serve's flags, and its admission flags pass the checks.
func TestDeploymentArgs(t *testing.T) {
	data, err := os.ReadFile("../../deploy/kubernetes/deployment.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var d appsv1.Deployment
	if err := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096).Decode(&d); err != nil {
		t.Fatal(err)
	}
	args := d.Spec.Template.Spec.Containers[0].Args
	if len(args) == 0 || args[0] != "serve" {
		t.Fatalf("the container's args %q do not run serve", args)
	}
	cmd := newServeCmd()
	if err := cmd.Flags().Parse(args[1:]); err != nil {
		t.Fatalf("serve's flags refuse the Deployment's args: %v", err)
	}
	get := func(name string) string { return cmd.Flags().Lookup(name).Value.String() }
	exempt, err := cmd.Flags().GetStringSlice("admission-exempt-namespaces")
	if err != nil {
		t.Fatal(err)
	}
	f := serveFlags{backend: get("backend"), admission: admissionFlags{
		listen: get("admission-listen"), tlsCert: get("admission-tls-cert"), tlsKey: get("admission-tls-key"), exempt: exempt}}
	if f.backend != "kubernetes" || f.admission.listen == "" {
		t.Errorf("the Deployment runs --backend %q --admission-listen %q; want kubernetes and an address", f.backend, f.admission.listen)
	}
	if err := checkAdmission(f); err != nil {
		t.Errorf("the Deployment's admission flags: %v", err)
	}
}

// TestServeAdmission: serve --backend kubernetes --admission-listen
// answers AdmissionReviews over TLS, reading the team of a namespace
// from the cluster and the blocks from the service, and stops cleanly.
func TestServeAdmission(t *testing.T) {
	// TestMain hides the home directory, where the control plane's
	// binaries are cached.
	if os.Getenv("CAPBLOCK_CACHE") == "" && os.Getenv("CAPBLOCK_KUBE_BIN") == "" {
		if u, err := user.Current(); err == nil {
			t.Setenv("CAPBLOCK_CACHE", filepath.Join(u.HomeDir, ".cache", "capblock"))
		}
	}
	c := kubetest.Start(t, kubetest.Options{})
	ctx := t.Context()
	if _, err := c.AddGPUNodes(ctx, 1, 8, "zone-a", nil); err != nil {
		t.Fatal(err)
	}
	admin := clientset.NewForConfigOrDie(c.AdminConfig())
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ml-a", Labels: map[string]string{admission.TeamLabel: "team-a"}}}
	if _, err := admin.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile, pool := selfSignedCert(t, dir)
	addr, api := freeAddr(t), freeAddr(t)

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan result, 1)
	go func() {
		done <- runApp(runCtx, nil, "serve", "--db", filepath.Join(dir, "capblock.db"), "--listen", api,
			"--admin-token-file", filepath.Join(dir, "admin.token"), "--jobs-dir", filepath.Join(dir, "jobs"), "--log-level", "warn",
			"--backend", "kubernetes", "--kubeconfig", c.Kubeconfig,
			"--admission-listen", addr, "--admission-tls-cert", certFile, "--admission-tls-key", keyFile)
	}()
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}

	// A pod of ml-a naming a block that team-a does not hold, once the
	// server answers.
	pod := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ml-a", Labels: map[string]string{"capblock.io/block": "cb-nope"}}}
	var resp *admissionv1.AdmissionResponse
	deadline := time.Now().Add(60 * time.Second)
	for resp == nil {
		select {
		case r := <-done:
			t.Fatalf("serve stopped: exit %d, %s", r.code, r.stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the admission listener did not answer within 60 s")
		}
		resp = postReview(t, client, "https://"+addr+admission.ValidatePath, pod)
		if resp == nil {
			time.Sleep(100 * time.Millisecond)
		}
	}
	if want := "the pod names block cb-nope, but namespace ml-a's team cannot hold blocks: team team-a does not exist"; resp.Allowed || resp.Result == nil || resp.Result.Message != want {
		t.Errorf("answer %+v; want %q", resp.Result, want)
	}
	// Stopped once serving the API too, it exits cleanly.
	for {
		r, err := http.Get("http://" + api + "/healthz")
		if err == nil {
			r.Body.Close()
			break
		}
		select {
		case r := <-done:
			t.Fatalf("serve stopped: exit %d, %s", r.code, r.stderr)
		case <-time.After(100 * time.Millisecond):
		}
	}
	stop()
	if r := <-done; r.code != 0 {
		t.Errorf("serve: exit %d, %s", r.code, r.stderr)
	}
}

// postReview posts a review of creating pod; nil while nothing answers.
func postReview(t *testing.T, client *http.Client, url string, pod *corev1.Pod) *admissionv1.AdmissionResponse {
	t.Helper()
	raw, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{UID: "u", Operation: admissionv1.Create, Namespace: pod.Namespace, Name: pod.Name,
			Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"}, Object: runtime.RawExtension{Raw: raw}},
	})
	if err != nil {
		t.Fatal(err)
	}
	r, err := client.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return nil
	}
	defer r.Body.Close()
	var out admissionv1.AdmissionReview
	if err := json.NewDecoder(r.Body).Decode(&out); err != nil || out.Response == nil {
		t.Fatalf("HTTP %d: not a review (%v)", r.StatusCode, err)
	}
	return out.Response
}

// selfSignedCert writes a certificate for 127.0.0.1 and its key into
// dir, and returns their paths and a pool that trusts it.
func selfSignedCert(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "capblock admission"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AppendCertsFromPEM(certPEM)
	return certFile, keyFile, pool
}

// freeAddr is a loopback address with a port free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}
