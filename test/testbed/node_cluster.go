package testbed

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// startControllers starts kube-controller-manager (it lifts the
// not-ready taint, runs Deployments and ReplicaSets, Endpoints, makes each
// namespace's default ServiceAccount and its kube-root-ca.crt) and
// kube-scheduler on the host, their ports free ones on loopback.
func (n *Node) startControllers() error {
	kc := n.Kube.Kubeconfig
	kcmPort, err := FreePort()
	if err != nil {
		return err
	}
	_, err = n.startProcess("kube-controller-manager", false, nil, n.assets.KubeControllerManager,
		"--kubeconfig", kc, "--authentication-kubeconfig", kc, "--authorization-kubeconfig", kc,
		"--controllers=*,-csrsigning", "--leader-elect=false", "--use-service-account-credentials=false",
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(kcmPort),
		"--service-account-private-key-file="+filepath.Join(n.dir, "apiserver", saSignerKey),
		"--root-ca-file="+filepath.Join(n.dir, "apiserver", apiServerCA),
		"--flex-volume-plugin-dir="+filepath.Join(n.dir, "plugins"),
		"--node-monitor-period=1s")
	if err != nil {
		return err
	}
	schedPort, err := FreePort()
	if err != nil {
		return err
	}
	_, err = n.startProcess("kube-scheduler", false, nil, n.assets.KubeScheduler,
		"--kubeconfig", kc, "--authentication-kubeconfig", kc, "--authorization-kubeconfig", kc,
		"--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(schedPort))
	return err
}

// corefile serves cluster.local from the apiserver on the node's address.
func corefile(kubeconfig string) string {
	return fmt.Sprintf(`cluster.local:53 in-addr.arpa:53 {
    bind %s
    errors
    kubernetes cluster.local in-addr.arpa {
        kubeconfig %s
        pods insecure
    }
}
`, NodeIP, kubeconfig)
}

// startProxyAndDNS starts kube-proxy (iptables mode) and CoreDNS in the
// node's namespace. kube-proxy masquerades all Service traffic: pods share
// one bridge, and a reply bridged straight back to the client would skip
// the un-DNAT otherwise. It leaves conntrack's host-wide sysctls alone.
func (n *Node) startProxyAndDNS(ctx context.Context) error {
	env := []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	_, err := n.startProcess("kube-proxy", true, env, n.assets.KubeProxy,
		"--kubeconfig", n.Kube.Kubeconfig, "--hostname-override", NodeName, "--proxy-mode", "iptables",
		"--cluster-cidr", nodePodCIDR, "--masquerade-all", "--conntrack-max-per-core=0",
		"--conntrack-tcp-timeout-established=0", "--conntrack-tcp-timeout-close-wait=0",
		"--bind-address", NodeIP, "--healthz-bind-address=127.0.0.1:10256", "--metrics-bind-address=127.0.0.1:10249")
	if err != nil {
		return err
	}
	conf := filepath.Join(n.dir, "Corefile")
	if err := os.WriteFile(conf, []byte(corefile(n.Kube.Kubeconfig)), 0o644); err != nil {
		return err
	}
	dns, err := n.startProcess("coredns", true, nil, n.assets.CoreDNS, "-conf", conf)
	if err != nil {
		return err
	}
	// Answered once CoreDNS has synced with the apiserver.
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, net.JoinHostPort(NodeIP, "53"))
	}}
	for {
		qctx, cancel := context.WithTimeout(ctx, time.Second)
		addrs, err := r.LookupHost(qctx, "kubernetes.default.svc.cluster.local")
		cancel()
		if err == nil && len(addrs) > 0 {
			return nil
		}
		select {
		case <-dns.done:
			return fmt.Errorf("coredns exited (%v):\n%s", dns.err, dns.Tail(30))
		case <-ctx.Done():
			return fmt.Errorf("CoreDNS does not answer for kubernetes.default: %w (last %v)\n%s", ctx.Err(), err, dns.Tail(30))
		case <-time.After(200 * time.Millisecond):
		}
	}
}
