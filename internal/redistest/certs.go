package redistest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
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

// Names of the PEM files a TLS server keeps in its directory.
const (
	caCertName     = "ca.crt"
	serverCertName = "server.crt"
	serverKeyName  = "server.key"
)

// tlsFiles are PEM-encoded certificates and key for one TLS server.
type tlsFiles struct {
	ca, cert, key []byte
}

// newTLSFiles makes a CA and a server certificate for 127.0.0.1, ::1 and
// localhost that it signs, both ECDSA P-256 and valid for a day, and a
// client config that trusts only that CA.
func newTLSFiles() (*tlsFiles, *tls.Config, error) {
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("redistest: generate CA key: %w", err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "redistest CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("redistest: create CA certificate: %w", err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, nil, fmt.Errorf("redistest: parse CA certificate: %w", err)
	}

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("redistest: generate server key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "redistest server"},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		// ClientAuth too, so the same pair can serve tls-replication.
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("redistest: create server certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("redistest: marshal server key: %w", err)
	}

	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	files := &tlsFiles{
		ca:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		key:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}
	client := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
	return files, client, nil
}

// write puts the PEM files in dir.
func (f *tlsFiles) write(dir string) error {
	for name, data := range map[string][]byte{caCertName: f.ca, serverCertName: f.cert, serverKeyName: f.key} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return fmt.Errorf("redistest: write %s: %w", name, err)
		}
	}
	return nil
}

// args returns the redis-server TLS arguments for files in dir.
func (f *tlsFiles) args(dir string) []string {
	return []string{
		"--tls-cert-file", filepath.Join(dir, serverCertName),
		"--tls-key-file", filepath.Join(dir, serverKeyName),
		"--tls-ca-cert-file", filepath.Join(dir, caCertName),
		"--tls-auth-clients", "no",
	}
}
