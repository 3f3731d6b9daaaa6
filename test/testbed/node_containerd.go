package testbed

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"
)

// containerdConfig is containerd's configuration (version 3) with every
// path under dir. Without CAP_SYS_RESOURCE here runc fails every sandbox
// until restrict_oom_score_adj is set; the registry is plain HTTP.
func containerdConfig(dir, registry, pause, runc, cniBinDir string) string {
	return fmt.Sprintf(`version = 3
root = "%[1]s/containerd/root"
state = "%[1]s/containerd/state"
temp = "%[1]s/containerd/tmp"

[grpc]
  address = "%[1]s/run/containerd.sock"

[ttrpc]
  address = "%[1]s/run/containerd.sock.ttrpc"

[debug]
  address = "%[1]s/run/containerd-debug.sock"
  level = "info"

[plugins]
  [plugins.'io.containerd.internal.v1.opt']
    path = "%[1]s/containerd/opt"
  [plugins.'io.containerd.nri.v1.nri']
    disable = true
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = "overlayfs"
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = "%[3]s"
    [plugins.'io.containerd.cri.v1.images'.registry]
      config_path = "%[1]s/containerd/certs.d"
  [plugins.'io.containerd.cri.v1.runtime']
    enable_selinux = false
    restrict_oom_score_adj = true
    netns_mounts_under_state_dir = true
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = "runc"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          BinaryName = "%[4]s"
          SystemdCgroup = false
          Root = "%[1]s/run/runc"
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = ["%[5]s"]
      conf_dir = "%[1]s/cni/net.d"
      use_internal_loopback = true
`, dir, registry, pause, runc, cniBinDir)
}

// registryHosts is containerd's hosts.toml for the bed's plain-HTTP
// registry: every request carries authorization (the registry user's Basic
// credentials), so pulls need no pod's pull secret.
func registryHosts(registry, authorization string) string {
	return fmt.Sprintf(`server = "http://%[1]s"

[host."http://%[1]s"]
  capabilities = ["pull", "resolve"]
  skip_verify = true
  [host."http://%[1]s".header]
    Authorization = %[2]q
`, registry, authorization)
}

// podNetwork is the CNI configuration: a bridge in the node's namespace
// with the pod range, no masquerade of its own (the namespace's rule does
// it, toward the host only) and no default route: routes to the veth's /30
// (the host, and CoreDNS on the node's address) and to the Service range,
// whose addresses kube-proxy's rules rewrite in the node's namespace.
func podNetwork(dir string) string {
	return fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "sless-node",
  "plugins": [{
    "type": "bridge",
    "bridge": "cni0",
    "isGateway": true,
    "ipMasq": false,
    "hairpinMode": true,
    "ipam": {
      "type": "host-local",
      "dataDir": "%s/cni/ipam",
      "ranges": [[{"subnet": "%s", "gateway": "10.88.0.1"}]],
      "routes": [{"dst": "%s"}, {"dst": "%s"}]
    }
  }]
}
`, dir, nodePodCIDR, nodeVethCIDR, nodeServiceCIDR)
}

// startContainerd writes containerd's configuration and starts it in the
// node's namespace, then waits for its socket.
func (n *Node) startContainerd(ctx context.Context) error {
	files := map[string]string{
		"containerd/config.toml": containerdConfig(n.dir, n.Registry, n.PauseImage, n.assets.Runc, n.assets.CNIBinDir),
		filepath.Join("containerd/certs.d", n.Registry, "hosts.toml"): registryHosts(n.Registry, n.reg.RegistryAuthorization()),
		"cni/net.d/10-sless-node.conflist":                            podNetwork(n.dir),
	}
	for name, content := range files {
		p := filepath.Join(n.dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		// 0600: hosts.toml holds the registry's password.
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			return err
		}
	}
	env := []string{"PATH=" + n.assets.Dir + ":/usr/sbin:/usr/bin:/sbin:/bin"}
	p, err := n.startProcess("containerd", true, env, n.assets.Containerd, "--config", filepath.Join(n.dir, "containerd/config.toml"))
	if err != nil {
		return err
	}
	sock := filepath.Join(n.dir, "run/containerd.sock")
	for {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("containerd exited (%v):\n%s", p.err, p.Tail(30))
		case <-ctx.Done():
			return fmt.Errorf("containerd's socket %s: %w\n%s", sock, ctx.Err(), p.Tail(30))
		case <-time.After(100 * time.Millisecond):
		}
	}
}
