package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// natsTLSTimeout is the server's TLS handshake timeout in seconds. nats-server's default of 2s
// is tight for a handshake on a busy 2-core machine running a control plane next to it.
const natsTLSTimeout = 10

// NewTLSAuth creates a certificate authority of its own, a serving certificate for the
// loopback addresses and a client certificate, all signed by it, and makes the server require
// TLS and verify client certificates against that authority (verify: true). Files written to
// dir: nats-ca.crt, nats-server.crt/.key and nats-client.crt/.key.
func NewTLSAuth(dir string) (NATSAuth, error) {
	p, err := newCA(filepath.Join(dir, "nats-ca.crt"), "kube-nats-relay-testenv-nats-ca")
	if err != nil {
		return NATSAuth{}, err
	}
	a := NATSAuth{
		CAFile:   p.caFile,
		CertFile: filepath.Join(dir, "nats-client.crt"),
		KeyFile:  filepath.Join(dir, "nats-client.key"),
	}
	serverCert, serverKey := filepath.Join(dir, "nats-server.crt"), filepath.Join(dir, "nats-server.key")
	for _, c := range []struct {
		subject   pkix.Name
		server    bool
		cert, key string
	}{
		{pkix.Name{CommonName: "nats-server"}, true, serverCert, serverKey},
		{pkix.Name{CommonName: "kube-nats-relay"}, false, a.CertFile, a.KeyFile},
	} {
		certPEM, keyPEM, err := p.sign(c.subject, c.server)
		if err != nil {
			return NATSAuth{}, err
		}
		if err := os.WriteFile(c.cert, certPEM, 0o600); err != nil {
			return NATSAuth{}, err
		}
		if err := writeSecret(c.key, keyPEM); err != nil {
			return NATSAuth{}, err
		}
	}
	var conf strings.Builder
	conf.WriteString("tls {\n")
	fmt.Fprintf(&conf, "  cert_file: %s\n  key_file: %s\n  ca_file: %s\n", confString(serverCert), confString(serverKey), confString(a.CAFile))
	fmt.Fprintf(&conf, "  verify: true\n  timeout: %d\n}\n", natsTLSTimeout)
	a.ServerConfig = conf.String()
	return a, nil
}

// newCA creates a certificate authority alone, its certificate written to caFile, for
// components that must not share the control plane's (newPKI adds the apiserver's serving
// certificate and the service account keys). It signs with pki.sign.
func newCA(caFile, commonName string) (*pki, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate ca key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(certValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("create ca certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse ca certificate: %w", err)
	}
	p := &pki{
		caCert: cert,
		caKey:  key,
		caPEM:  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		caFile: caFile,
	}
	if err := os.WriteFile(caFile, p.caPEM, 0o600); err != nil {
		return nil, err
	}
	return p, nil
}
