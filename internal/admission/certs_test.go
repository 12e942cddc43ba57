package admission_test

import (
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
	"path/filepath"
	"testing"
	"time"

	"capblock/internal/admission"
)

// testPKI is a CA made for one test and a serving certificate it signed
// for 127.0.0.1, in PEM files, as the API server must trust a webhook.
type testPKI struct {
	caPEM             []byte
	certFile, keyFile string
}

func newTestPKI(t testing.TB) testPKI {
	t.Helper()
	dir := t.TempDir()
	now := time.Now()
	caKey := newKey(t)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "capblock test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "capblock admission"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	p := testPKI{
		caPEM:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		certFile: filepath.Join(dir, "tls.crt"),
		keyFile:  filepath.Join(dir, "tls.key"),
	}
	if err := os.WriteFile(p.certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p.keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestServerReadsRenewedCertificate: the admission server reads its
// certificate again when the files change (cert-manager renews them in
// place), and keeps the last good one while they cannot be read.
func TestServerReadsRenewedCertificate(t *testing.T) {
	first := newTestPKI(t)
	srv, err := admission.NewServer(http.NotFoundHandler(), first.certFile, first.keyFile)
	if err != nil {
		t.Fatal(err)
	}
	served := func() string {
		t.Helper()
		c, err := srv.TLSConfig.GetCertificate(&tls.ClientHelloInfo{})
		if err != nil {
			t.Fatal(err)
		}
		return string(c.Certificate[0])
	}
	before := served()

	// 1. Renewed: the files are replaced by another certificate.
	renewed := newTestPKI(t)
	later := time.Now().Add(time.Minute)
	for from, to := range map[string]string{renewed.certFile: first.certFile, renewed.keyFile: first.keyFile} {
		data, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(to, later, later); err != nil {
			t.Fatal(err)
		}
	}
	after := served()
	if after == before {
		t.Fatal("the server kept the old certificate after the files changed")
	}

	// 2. Half-written: the last good certificate stays.
	if err := os.WriteFile(first.keyFile, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(first.keyFile, later.Add(time.Minute), later.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if got := served(); got != after {
		t.Errorf("a key that cannot be read replaced the certificate")
	}

	// 3. No certificate at all: NewServer fails at once.
	if _, err := admission.NewServer(http.NotFoundHandler(), first.certFile+".missing", first.keyFile); err == nil {
		t.Error("NewServer took a certificate file that does not exist")
	}
}
