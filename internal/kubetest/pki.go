package kubetest

import (
	"crypto"
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
	"time"
)

// pkiFiles are the paths of the cluster's certificates and keys.
type pkiFiles struct {
	caPEM                []byte
	caCert               string
	servingCert          string // the API server's, signed by the CA
	servingKey           string
	serviceAccountKey    string // signs ServiceAccount tokens
	serviceAccountPublic string // checks them
}

// writePKI makes a CA, a serving certificate for the API server on
// loopback and a ServiceAccount key pair, and writes them under dir/pki.
// ECDSA P-256 keys: quick to make, and every component takes them.
func writePKI(dir string) (pkiFiles, error) {
	pkiDir := filepath.Join(dir, "pki")
	if err := os.Mkdir(pkiDir, 0o700); err != nil {
		return pkiFiles{}, fmt.Errorf("creating pki directory: %w", err)
	}
	f := pkiFiles{
		caCert:               filepath.Join(pkiDir, "ca.crt"),
		servingCert:          filepath.Join(pkiDir, "apiserver.crt"),
		servingKey:           filepath.Join(pkiDir, "apiserver.key"),
		serviceAccountKey:    filepath.Join(pkiDir, "sa.key"),
		serviceAccountPublic: filepath.Join(pkiDir, "sa.pub"),
	}
	now := time.Now()
	// 1. The CA.
	caKey, err := newKey()
	if err != nil {
		return f, err
	}
	ca := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "kubetest-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, caKey.Public(), caKey)
	if err != nil {
		return f, fmt.Errorf("signing CA certificate: %w", err)
	}
	f.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	// 2. The API server's certificate, for the names a client may use.
	servingKey, err := newKey()
	if err != nil {
		return f, err
	}
	serving := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback, net.IPv4(10, 96, 0, 1)},
	}
	servingDER, err := x509.CreateCertificate(rand.Reader, serving, ca, servingKey.Public(), caKey)
	if err != nil {
		return f, fmt.Errorf("signing serving certificate: %w", err)
	}
	// 3. The ServiceAccount key pair.
	saKey, err := newKey()
	if err != nil {
		return f, err
	}
	saPublic, err := x509.MarshalPKIXPublicKey(saKey.Public())
	if err != nil {
		return f, fmt.Errorf("encoding ServiceAccount public key: %w", err)
	}
	files := []struct {
		path      string
		blockType string
		der       []byte
	}{
		{f.servingCert, "CERTIFICATE", servingDER},
		{f.servingKey, "PRIVATE KEY", mustPKCS8(servingKey)},
		{f.serviceAccountKey, "PRIVATE KEY", mustPKCS8(saKey)},
		{f.serviceAccountPublic, "PUBLIC KEY", saPublic},
	}
	if err := os.WriteFile(f.caCert, f.caPEM, 0o600); err != nil {
		return f, fmt.Errorf("writing CA certificate: %w", err)
	}
	for _, file := range files {
		data := pem.EncodeToMemory(&pem.Block{Type: file.blockType, Bytes: file.der})
		if err := os.WriteFile(file.path, data, 0o600); err != nil {
			return f, fmt.Errorf("writing %s: %w", filepath.Base(file.path), err)
		}
	}
	return f, nil
}

func newKey() (*ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating key: %w", err)
	}
	return key, nil
}

// mustPKCS8 encodes key; it cannot fail for an ECDSA P-256 key.
func mustPKCS8(key crypto.Signer) []byte {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		panic(err)
	}
	return der
}
