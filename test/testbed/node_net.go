package testbed

import (
	"bytes"
	"fmt"
	"os/exec"
	"strings"
)

// setupNodeNet makes the node's network namespace and its veth to the
// host: a /30 with no default route inside, so nothing in it reaches past
// the host-side address. Pods' traffic to the host is masqueraded as the
// node's address (the host has no route back to the pod range and would
// answer through its default route), and any other forwarded pod packet
// out of the veth is dropped. The host routes the Service and pod ranges
// into the namespace, so a process on the host (sless-api in the tests)
// reaches ClusterIPs, through kube-proxy's rules there, and pods; the
// routes go with the veth.
func setupNodeNet() error {
	for _, argv := range [][]string{
		{"ip", "netns", "add", nodeNetns},
		{"ip", "link", "add", nodeVethHost, "type", "veth", "peer", "name", nodeVethNode, "netns", nodeNetns},
		{"ip", "addr", "add", NodeHostIP + "/30", "dev", nodeVethHost},
		{"ip", "link", "set", nodeVethHost, "up"},
		{"ip", "-n", nodeNetns, "addr", "add", NodeIP + "/30", "dev", nodeVethNode},
		{"ip", "-n", nodeNetns, "link", "set", nodeVethNode, "up"},
		{"ip", "-n", nodeNetns, "link", "set", "lo", "up"},
		{"ip", "route", "add", nodeServiceCIDR, "via", NodeIP, "dev", nodeVethHost},
		{"ip", "route", "add", nodePodCIDR, "via", NodeIP, "dev", nodeVethHost},
		inNodeNetns("iptables", "-t", "nat", "-A", "POSTROUTING", "-s", nodePodCIDR, "-o", nodeVethNode, "-j", "MASQUERADE"),
		inNodeNetns("iptables", "-A", "FORWARD", "-s", nodePodCIDR, "-o", nodeVethNode, "!", "-d", NodeHostIP, "-j", "DROP"),
	} {
		if _, err := run(argv...); err != nil {
			return err
		}
	}
	return nil
}

// inNodeNetns is argv run inside the node's network namespace.
func inNodeNetns(argv ...string) []string {
	return append([]string{"nsenter", "--net=/run/netns/" + nodeNetns}, argv...)
}

// removeNodeNet deletes the namespace (and with it the node side of the
// veth and every rule inside) and the host side of the veth.
func removeNodeNet() error {
	var errs []string
	if out, _ := run("ip", "netns", "list"); strings.Contains(out, nodeNetns) {
		if _, err := run("ip", "netns", "del", nodeNetns); err != nil {
			errs = append(errs, err.Error())
		}
	}
	// Deleting the namespace removes the pair asynchronously: the link may
	// vanish at any moment, so a failed del counts only if the link stays.
	if linkExists(nodeVethHost) {
		if _, err := run("ip", "link", "del", nodeVethHost); err != nil && linkExists(nodeVethHost) {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

func linkExists(name string) bool {
	_, err := run("ip", "link", "show", name)
	return err == nil
}

// run runs argv and returns its output, or an error carrying it.
func run(argv ...string) (string, error) {
	var out bytes.Buffer
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}
