package testbed

import (
	"fmt"
	"os"
	"path/filepath"
)

// kubeletConfig is kubelet's configuration for this machine: cgroups v1
// with the cgroupfs driver (PID 1 is not systemd), swap tolerated,
// pods under cgroupRoot, anonymous AlwaysAllow so the apiserver reads logs
// and execs without client certificates, CoreDNS on the node's address as
// the cluster's DNS, every path under dir.
func kubeletConfig(dir, cgroupRoot string) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: %[2]s
failSwapOn: false
containerRuntimeEndpoint: unix://%[1]s/run/containerd.sock
address: %[3]s
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
resolvConf: ""
clusterDNS: [%[3]s]
clusterDomain: cluster.local
podLogsDir: %[1]s/podlogs
registerNode: true
serializeImagePulls: false
enforceNodeAllocatable: ["pods"]
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: "100Mi"
  nodefs.available: "1%%"
  imagefs.available: "1%%"
  nodefs.inodesFree: "1%%"
staticPodPath: ""
localStorageCapacityIsolation: true
volumePluginDir: %[1]s/plugins
`, dir, cgroupRoot, NodeIP)
}

// startKubelet starts kubelet in the node's namespace, registering the
// node with the bed's admin credentials.
func (n *Node) startKubelet() error {
	cfg := filepath.Join(n.dir, "kubelet-config.yaml")
	if err := os.WriteFile(cfg, []byte(kubeletConfig(n.dir, n.state.CgroupRoot)), 0o644); err != nil {
		return err
	}
	env := []string{"PATH=" + n.assets.Dir + ":/usr/sbin:/usr/bin:/sbin:/bin"}
	_, err := n.startProcess("kubelet", true, env, n.assets.Kubelet,
		"--config", cfg, "--kubeconfig", n.Kube.Kubeconfig, "--root-dir", filepath.Join(n.dir, "kubelet"),
		"--cert-dir", filepath.Join(n.dir, "kubelet", "pki"),
		"--hostname-override", NodeName, "--node-ip", NodeIP, "--v=2")
	return err
}
