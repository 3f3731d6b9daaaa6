package testbed

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"golang.org/x/crypto/bcrypt"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Registry is the bed's container registry: distribution's registry (built
// by hack/test-assets.sh registry) with filesystem storage and htpasswd auth,
// so every push and pull carries credentials the way a cluster's does.
type Registry struct {
	// Host is host:port, plain HTTP.
	Host     string
	Username string
	Password string

	dir    string
	cmd    *exec.Cmd
	exited chan struct{}
}

// StartRegistry starts a registry storing under dir and listening on addr:
// host:port, or a host (an address of this machine: loopback for tests, the
// host-side veth address for the node) on a free port. It returns once the
// registry answers.
func StartRegistry(dir, addr string) (*Registry, error) {
	bin, err := testAssets("registry", "builds distribution's registry from the module proxy")
	if err != nil {
		return nil, err
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		port, err := freePortOn(addr)
		if err != nil {
			return nil, err
		}
		addr = net.JoinHostPort(addr, strconv.Itoa(port))
	}
	r := &Registry{Host: addr, Username: "sless-bed", Password: randomSuffix(16), dir: dir}
	if err := os.MkdirAll(filepath.Join(dir, "storage"), 0o755); err != nil {
		return nil, err
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(r.Password), bcrypt.DefaultCost)
	if err != nil {
		return nil, err
	}
	htpasswd := filepath.Join(dir, "htpasswd")
	if err := os.WriteFile(htpasswd, []byte(r.Username+":"+string(hash)+"\n"), 0o600); err != nil {
		return nil, err
	}
	config := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(config, []byte(registryConfig(r.Host, filepath.Join(dir, "storage"), htpasswd)), 0o600); err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(dir, "registry.log"))
	if err != nil {
		return nil, err
	}
	r.cmd = exec.Command(bin, "serve", config)
	// No collector runs here: tracing exports nowhere.
	r.cmd.Env = append(os.Environ(), "OTEL_TRACES_EXPORTER=none", "OTEL_METRICS_EXPORTER=none", "OTEL_LOGS_EXPORTER=none")
	r.cmd.Stdout, r.cmd.Stderr = logf, logf
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := r.cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start registry: %w", err)
	}
	r.exited = make(chan struct{})
	go func() { _ = r.cmd.Wait(); logf.Close(); close(r.exited) }()
	if err := r.awaitReady(r.exited); err != nil {
		r.Stop()
		log, _ := os.ReadFile(filepath.Join(dir, "registry.log"))
		return nil, fmt.Errorf("registry on %s: %w\n%s", r.Host, err, log)
	}
	return r, nil
}

// registryConfig is the registry's configuration: storage under storage,
// the one user in htpasswd, no access log (the bed keeps the registry's
// errors only).
func registryConfig(host, storage, htpasswd string) string {
	return fmt.Sprintf(`version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: %q
  delete:
    enabled: true
http:
  addr: %q
  secret: %q
auth:
  htpasswd:
    realm: sless-bed
    path: %q
`, storage, host, randomSuffix(16), htpasswd)
}

// awaitReady waits for /v2/ to ask for credentials: the registry is up and
// its auth is on.
func (r *Registry) awaitReady(exited <-chan struct{}) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + r.Host + "/v2/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusUnauthorized {
				return nil
			}
			err = fmt.Errorf("GET /v2/ without credentials answered %s, want 401", resp.Status)
		}
		select {
		case <-exited:
			return fmt.Errorf("registry exited: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop ends the registry and waits for it to exit; its storage stays
// under the directory it was given.
func (r *Registry) Stop() {
	if r.cmd != nil && r.cmd.Process != nil {
		_ = r.cmd.Process.Kill()
		<-r.exited
	}
}

// Auth is the registry's user for go-containerregistry.
func (r *Registry) Auth() authn.Authenticator {
	return &authn.Basic{Username: r.Username, Password: r.Password}
}

// DockerConfigJSON is a Docker config file granting the registry's user on
// this registry: what a kubernetes.io/dockerconfigjson Secret holds and
// kaniko reads as /kaniko/.docker/config.json.
func (r *Registry) DockerConfigJSON() []byte {
	type entry struct {
		Username string `json:"username"`
		Password string `json:"password"`
		Auth     string `json:"auth"`
	}
	b, err := json.Marshal(map[string]map[string]entry{"auths": {r.Host: {
		Username: r.Username, Password: r.Password,
		Auth: base64.StdEncoding.EncodeToString([]byte(r.Username + ":" + r.Password)),
	}}})
	if err != nil {
		panic(err) // strings only
	}
	return b
}

// PushSecret is the Secret sless's controller names with
// SLESS_REGISTRY_SECRET (--registry-secret) in a function's namespace: the
// build's kaniko step pushes with it.
func (r *Registry) PushSecret(namespace, name string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: r.DockerConfigJSON()},
	}
}

// freePortOn asks the kernel for a free TCP port on host.
func freePortOn(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// ImageProgramsDir is where hack/test-assets.sh keeps the static programs
// the node's images hold, building them on first use.
func ImageProgramsDir() (string, error) {
	return testAssets("images", "builds Knative's data plane and Tekton's step programs from the module proxy")
}

// SlessStatic is sless built from this checkout with CGO_ENABLED=0, for
// the image of the trigger and job pods.
func SlessStatic() (string, error) {
	return testAssets("sless-static", "builds ./cmd/sless statically")
}
