package admission

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"sync"
	"time"
)

// NewServer returns the HTTPS server of h, its certificate and key read
// from certFile and keyFile, and read again at the next connection
// whenever either file changes: cert-manager, and a Secret's volume,
// renew them in place. It fails when the files cannot be read now.
func NewServer(h http.Handler, certFile, keyFile string) (*http.Server, error) {
	c := &certFiles{cert: certFile, key: keyFile}
	if _, err := c.get(nil); err != nil {
		return nil, err
	}
	return &http.Server{
		Handler:           h,
		TLSConfig:         &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: c.get},
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      15 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}, nil
}

// certFiles is a certificate read from files, again when they change.
type certFiles struct {
	cert, key string

	mu      sync.Mutex
	loaded  *tls.Certificate
	modCert time.Time
	modKey  time.Time
}

// get returns the certificate, read again if a file's time changed. A
// file that cannot be read keeps the certificate read last, if any: a
// renewal caught half-written is read at a later connection.
func (c *certFiles) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ci, errc := os.Stat(c.cert)
	ki, errk := os.Stat(c.key)
	if errc == nil && errk == nil && c.loaded != nil && ci.ModTime().Equal(c.modCert) && ki.ModTime().Equal(c.modKey) {
		return c.loaded, nil
	}
	cert, err := tls.LoadX509KeyPair(c.cert, c.key)
	switch {
	case err == nil:
		c.loaded = &cert
		if errc == nil && errk == nil {
			c.modCert, c.modKey = ci.ModTime(), ki.ModTime()
		}
	case c.loaded == nil:
		return nil, fmt.Errorf("reading the admission certificate %s and key %s: %w", c.cert, c.key, err)
	}
	return c.loaded, nil
}
