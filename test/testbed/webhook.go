package testbed

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"knative.dev/pkg/apis"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// admissionServer stands in for the webhooks of Knative Serving and Tekton
// Pipelines, whose own binaries cannot serve here: they register only by
// service reference and make certificates without IP names. It serves
// HTTPS on loopback and calls the upstream types' SetDefaults and Validate
// with the contexts their webhooks build (webhook_admit.go).
type admissionServer struct {
	srv    *http.Server
	url    string
	caPEM  []byte
	reader client.Reader
	done   chan error

	mu      sync.Mutex
	configs map[*project]builtConfig
}

// configMapCache is a reader of the projects' config maps kept by an
// informer, synced before it is returned; stop ends the informer.
func configMapCache(cfg *rest.Config, scheme *runtime.Scheme) (client.Reader, func(), error) {
	namespaces := map[string]cache.Config{}
	for _, p := range []*project{servingProject, tektonProject} {
		namespaces[p.namespace] = cache.Config{}
	}
	c, err := cache.New(cfg, cache.Options{Scheme: scheme, DefaultNamespaces: namespaces})
	if err != nil {
		return nil, nil, fmt.Errorf("config map cache: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Start(ctx) }()
	stop := func() { cancel(); <-done }
	syncCtx, syncCancel := context.WithTimeout(ctx, time.Minute)
	defer syncCancel()
	if _, err := c.GetInformer(syncCtx, &corev1.ConfigMap{}); err != nil {
		stop()
		return nil, nil, fmt.Errorf("config map informer: %w", err)
	}
	if !c.WaitForCacheSync(syncCtx) {
		stop()
		return nil, nil, errors.New("config map informer did not sync within a minute")
	}
	return c, stop, nil
}

// awaitConfig waits until the webhooks' informer holds the projects' config
// maps as live reads them, so that what was just installed decides the next
// admission.
func (a *admissionServer) awaitConfig(ctx context.Context, live client.Reader) error {
	seen := func(r client.Reader, ns string) (string, error) {
		cms := &corev1.ConfigMapList{}
		if err := r.List(ctx, cms, client.InNamespace(ns)); err != nil {
			return "", err
		}
		versions := make([]string, 0, len(cms.Items))
		for _, cm := range cms.Items {
			versions = append(versions, cm.Name+"@"+cm.ResourceVersion)
		}
		slices.Sort(versions)
		return strings.Join(versions, ";"), nil
	}
	for _, p := range []*project{servingProject, tektonProject} {
		want, err := seen(live, p.namespace)
		if err != nil {
			return fmt.Errorf("config maps of %s: %w", p.namespace, err)
		}
		err = wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			got, err := seen(a.reader, p.namespace)
			return got == want, err
		})
		if err != nil {
			return fmt.Errorf("the webhook's informer did not see the config maps of %s: %w", p.namespace, err)
		}
	}
	return nil
}

// startAdmission starts the server; reader reads the projects' config maps.
func startAdmission(reader client.Reader) (*admissionServer, error) {
	caPEM, cert, err := selfSignedServing()
	if err != nil {
		return nil, fmt.Errorf("webhook certificate: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("webhook listener: %w", err)
	}
	a := &admissionServer{url: "https://" + ln.Addr().String(), caPEM: caPEM, reader: reader, done: make(chan error, 1), configs: map[*project]builtConfig{}}
	mux := http.NewServeMux()
	for _, p := range []*project{servingProject, tektonProject} {
		mux.Handle(p.path+"/defaulting", a.handler(p, a.defaulting))
		mux.Handle(p.path+"/resource-validation", a.handler(p, a.validation))
	}
	a.srv = &http.Server{
		Handler:           mux,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() { a.done <- a.srv.ServeTLS(ln, "", "") }()
	return a, nil
}

// Close stops the server.
func (a *admissionServer) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := a.srv.Shutdown(ctx)
	if serr := <-a.done; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}

type admitFunc func(context.Context, *project, *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse

// handler answers an AdmissionReview with admit's response, as
// knative.dev/pkg's admission handler does.
func (a *admissionServer) handler(p *project, admit admitFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
			http.Error(w, fmt.Sprintf("could not decode an AdmissionReview: %v", err), http.StatusBadRequest)
			return
		}
		resp := admit(apis.WithHTTPRequest(r.Context(), r), p, review.Request)
		resp.UID = review.Request.UID
		out := admissionv1.AdmissionReview{TypeMeta: review.TypeMeta, Response: resp}
		w.Header().Set("Content-Type", "application/json")
		if err := json.NewEncoder(w).Encode(out); err != nil {
			http.Error(w, fmt.Sprintf("could not encode the response: %v", err), http.StatusInternalServerError)
		}
	})
}

// selfSignedServing makes a CA (returned PEM-encoded, the webhooks'
// caBundle) and a serving certificate it signs for 127.0.0.1.
func selfSignedServing() ([]byte, tls.Certificate, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	now := time.Now()
	ca := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "sless test bed webhook CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	if ca, err = x509.ParseCertificate(caDER); err != nil {
		return nil, tls.Certificate{}, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	return caPEM, tls.Certificate{Certificate: [][]byte{leafDER}, PrivateKey: key}, nil
}

// LoopbackServingPEM is a fresh CA and a serving certificate it signs for
// 127.0.0.1, PEM-encoded, for a server a test starts with TLS.
func LoopbackServingPEM() (caPEM, certPEM, keyPEM []byte, err error) {
	caPEM, cert, err := selfSignedServing()
	if err != nil {
		return nil, nil, nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		return nil, nil, nil, err
	}
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]})
	keyPEM = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	return caPEM, certPEM, keyPEM, nil
}
