package e2e

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestFirstStartAndSecrets starts the binary on a fresh directory, over
// TLS: the first administrator's token is written to admin.token, readable
// only by its owner; the log names the file but never holds the token,
// not even after requests that carry it.
func TestFirstStartAndSecrets(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	bin := buildBinary(t)
	dir := t.TempDir()
	cert, key, pool := selfSigned(t, dir)
	var logs syncBuffer
	cmd := exec.Command(bin, "serve", "--db", filepath.Join(dir, "capblock.db"), "--listen", "127.0.0.1:0",
		"--tls-cert", cert, "--tls-key", key)
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	var url string
	for deadline := time.Now().Add(30 * time.Second); url == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if m := regexpURL.FindStringSubmatch(logs.String()); m != nil {
			url = m[1]
		}
	}
	if url == "" {
		t.Fatalf("the server did not say where it listens:\n%s", logs.String())
	}
	tokenFile := filepath.Join(dir, "admin.token")
	fi, err := os.Stat(tokenFile)
	if err != nil {
		t.Fatalf("admin.token: %v", err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("admin.token has mode %o, want 600", fi.Mode().Perm())
	}
	data, _ := os.ReadFile(tokenFile)
	token := strings.TrimSpace(string(data))
	if !strings.Contains(logs.String(), tokenFile) {
		t.Errorf("the log does not say where the token is:\n%s", logs.String())
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	for _, path := range []string{"/v1/blocks", "/v1/users", "/v1/nothing"} {
		req, _ := http.NewRequest("GET", url+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET %s over TLS: %v", path, err)
		}
		resp.Body.Close()
	}
	if resp, err := client.Get(url + "/v1/blocks"); err != nil || resp.StatusCode != 401 {
		t.Fatalf("no token over TLS: %v %v", resp, err)
	}
	if strings.Contains(logs.String(), token) || strings.Contains(logs.String(), token[4:20]) {
		t.Fatalf("the log holds the token:\n%s", logs.String())
	}
	// A second start finds the administrator and leaves the token alone.
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	out, _ := exec.Command(bin, "serve", "--db", filepath.Join(dir, "capblock.db"), "--listen", "127.0.0.1:1", "--tls-cert", cert).CombinedOutput()
	if !strings.Contains(string(out), "--tls-cert and --tls-key go together") {
		t.Errorf("--tls-cert alone: %s", out)
	}
	if again, _ := os.ReadFile(tokenFile); !bytes.Equal(again, data) {
		t.Error("admin.token changed")
	}
}

var regexpURL = listenLineTLS

// selfSigned writes a certificate for 127.0.0.1 and its key.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "capblock test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600)
	c, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(c)
	return certFile, keyFile, pool
}

// syncBuffer is a bytes.Buffer safe for a process writing and a test reading.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
