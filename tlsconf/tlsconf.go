package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"
)

// MinVersion is the oldest TLS version served or spoken.
const MinVersion = tls.VersionTLS12

// Files is a certificate and key, and optionally a CA bundle, read from
// files and reloadable.
type Files struct {
	CertFile, KeyFile, CAFile string

	cert atomic.Pointer[tls.Certificate]
	pool atomic.Pointer[x509.CertPool]
}

// Load reads the files. caFile may be empty (HTTPS serves without client
// certificates); certFile and keyFile may not.
func Load(certFile, keyFile, caFile string) (*Files, error) {
	if certFile == "" || keyFile == "" {
		return nil, errors.New("a certificate and its key are both needed")
	}
	f := &Files{CertFile: certFile, KeyFile: keyFile, CAFile: caFile}
	if err := f.Reload(); err != nil {
		return nil, err
	}
	return f, nil
}

// Reload reads the files again; on error the previous ones stay in use.
func (f *Files) Reload() error {
	cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
	if err != nil {
		return fmt.Errorf("load certificate %s and key %s: %w", f.CertFile, f.KeyFile, err)
	}
	if cert.Leaf != nil && time.Now().After(cert.Leaf.NotAfter) {
		return fmt.Errorf("certificate %s expired on %s", f.CertFile, cert.Leaf.NotAfter.Format(time.RFC3339))
	}
	var pool *x509.CertPool
	if f.CAFile != "" {
		b, err := os.ReadFile(f.CAFile)
		if err != nil {
			return fmt.Errorf("read CA %s: %w", f.CAFile, err)
		}
		pool = x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b) {
			return fmt.Errorf("CA %s holds no PEM certificate", f.CAFile)
		}
	}
	f.cert.Store(&cert)
	if pool != nil {
		f.pool.Store(pool)
	}
	return nil
}

// NotAfter is when the certificate in use expires.
func (f *Files) NotAfter() time.Time {
	if c := f.cert.Load(); c != nil && c.Leaf != nil {
		return c.Leaf.NotAfter
	}
	return time.Time{}
}

func (f *Files) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return f.cert.Load(), nil
}

func (f *Files) getClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return f.cert.Load(), nil
}

// ServerConfig serves HTTPS with the certificate (no client certificates).
func (f *Files) ServerConfig() *tls.Config {
	return &tls.Config{MinVersion: MinVersion, GetCertificate: f.getCertificate}
}

// PeerServerConfig accepts only peers that present a certificate the CA
// signed.
func (f *Files) PeerServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion:     MinVersion,
		GetCertificate: f.getCertificate,
		// The chain is verified in VerifyConnection, against the CA in
		// use now (it reloads), for any key usage: one certificate per
		// node serves both directions.
		ClientAuth:       tls.RequireAnyClientCert,
		VerifyConnection: f.verifyPeer,
	}
}

// PeerClientConfig presents the certificate and accepts only servers
// whose certificate the CA signed.
func (f *Files) PeerClientConfig() *tls.Config {
	return &tls.Config{
		MinVersion:           MinVersion,
		GetClientCertificate: f.getClientCertificate,
		// Host names are not checked (package doc); VerifyConnection
		// checks the chain against the CA instead.
		InsecureSkipVerify: true, //nolint:gosec // verified in VerifyConnection
		VerifyConnection:   f.verifyPeer,
	}
}

// verifyPeer checks the other side's chain against the cluster CA.
func (f *Files) verifyPeer(cs tls.ConnectionState) error {
	pool := f.pool.Load()
	if pool == nil {
		return errors.New("no peer CA configured")
	}
	if len(cs.PeerCertificates) == 0 {
		return errors.New("the peer presented no certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{
		Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny},
	})
	if err != nil {
		return fmt.Errorf("peer certificate not signed by the cluster CA: %w", err)
	}
	return nil
}
