package testbed

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
	"time"
)

// The files envtest looks for in the apiserver's certificate directory:
// when apiserver.crt is there, it generates none of them.
const (
	apiServerCert = "apiserver.crt"
	apiServerKey  = "apiserver.key"
	saSignerCert  = "sa-signer.crt"
	saSignerKey   = "sa-signer.key"
	// apiServerCA is the CA of the serving certificate: the
	// controller-manager publishes it to every namespace (kube-root-ca.crt),
	// which is the ca.crt of pods' projected tokens.
	apiServerCA = "ca.crt"
)

// nodeKubernetesIP is the ClusterIP of the default/kubernetes Service: the
// first address of the Service range. In-cluster clients dial it.
const nodeKubernetesIP = "10.0.0.1"

// writeAPIServerPKI writes the apiserver's serving certificate and the
// ServiceAccount token signer into dir before envtest starts, in its file
// names, and returns the CA's PEM. envtest's own certificate names
// localhost and the listen address only; pods dial the kubernetes
// Service's ClusterIP or its DNS names and verify the certificate with the
// CA of their token's volume, so it must name those too.
func writeAPIServerPKI(dir string) ([]byte, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sless-node-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(48 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, BasicConstraintsValid: true, IsCA: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("apiserver CA: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	servingKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	servingDER, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "kube-apiserver"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(48 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(NodeHostIP), net.ParseIP(nodeKubernetesIP)},
		DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local"},
	}, ca, &servingKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("apiserver serving certificate: %w", err)
	}
	signer, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	signerTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(3), Subject: pkix.Name{CommonName: "sless-node-service-accounts"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(48 * time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
	}
	signerDER, err := x509.CreateCertificate(rand.Reader, signerTmpl, signerTmpl, &signer.PublicKey, signer)
	if err != nil {
		return nil, fmt.Errorf("service account signer: %w", err)
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	files := map[string][]byte{
		apiServerCA:   caPEM,
		apiServerCert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: servingDER}),
		saSignerCert:  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: signerDER}),
	}
	for name, key := range map[string]*ecdsa.PrivateKey{apiServerKey: servingKey, saSignerKey: signer} {
		der, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return nil, err
		}
		files[name] = pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			return nil, err
		}
	}
	return caPEM, nil
}
