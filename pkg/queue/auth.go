package queue

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
)

// Auth is what a consumer presents to its broker besides the URL, read
// from the trigger's connection Secret: the keys "username", "password",
// "token", "ca.crt", "tls.crt" and "tls.key" (a kubernetes.io/tls Secret
// has the last two).
type Auth struct {
	Username, Password string
	// Token is a bearer token, for brokers that take one (NATS).
	Token string
	// CA is PEM certificates to trust instead of the system's.
	CA []byte
	// Cert and Key are a PEM client certificate and its key, for mutual TLS.
	Cert, Key []byte
}

// TLSConfig is the TLS configuration Auth asks for, nil when it asks for
// none (a tls:// or ssl:// URL then uses the system's roots).
func (a Auth) TLSConfig() (*tls.Config, error) {
	if len(a.CA) == 0 && len(a.Cert) == 0 && len(a.Key) == 0 {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if len(a.CA) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(a.CA) {
			return nil, errors.New("ca.crt holds no PEM certificate")
		}
		cfg.RootCAs = pool
	}
	if len(a.Cert) > 0 || len(a.Key) > 0 {
		if len(a.Cert) == 0 || len(a.Key) == 0 {
			return nil, errors.New("a client certificate needs both tls.crt and tls.key")
		}
		pair, err := tls.X509KeyPair(a.Cert, a.Key)
		if err != nil {
			return nil, fmt.Errorf("tls.crt and tls.key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}
