package testbed

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestNodeSweepUndoesNetworkAndCgroups makes the node's network, cgroups
// and registry as StartNode does, without the node's programs, and checks
// that the sweep a next start runs leaves nothing.
func TestNodeSweepUndoesNetworkAndCgroups(t *testing.T) {
	if os.Geteuid() != 0 {
		SkipWithoutNode(t, "no real node: it needs root (network namespace, cgroups, mounts)")
	}
	for _, tool := range []string{"ip", "iptables", "nsenter", "gcc"} {
		if _, err := exec.LookPath(tool); err != nil {
			SkipWithoutNode(t, "no real node: "+tool+" missing (`bash hack/deps.sh realnode`)")
		}
	}
	lock, err := lockNode()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { lock.Close(); nodeHeld.Store(false) }()
	if err := cleanNode(); err != nil {
		t.Fatal(err)
	}
	before, err := TakeNodeHostState()
	if err != nil {
		t.Fatal(err)
	}
	s := newNodeState()
	if s.CgroupRoot, err = nodeCgroupRoot(); err != nil {
		t.Fatal(err)
	}
	s.Cgroups = absentCgroups(s.CgroupRoot)
	if err := s.save(); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(nodeBase(), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := setupNodeNet(); err != nil {
		t.Fatal(err)
	}
	if err := makeCgroups(s.CgroupRoot); err != nil {
		t.Fatal(err)
	}
	rules, err := run(inNodeNetns("iptables-save")...)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"-A POSTROUTING -s 10.88.0.0/16 -o sless-nn -j MASQUERADE", "-A FORWARD -s 10.88.0.0/16 ! -d 10.201.0.1/32 -o sless-nn -j DROP"} {
		if !strings.Contains(rules, want) {
			t.Errorf("the node's namespace lacks %q:\n%s", want, rules)
		}
	}
	if routes, _ := run("ip", "-n", nodeNetns, "route"); strings.Contains(routes, "default") {
		t.Errorf("the node's namespace has a default route:\n%s", routes)
	}
	n := &Node{dir: nodeBase()}
	if err := n.startRegistry(context.Background()); err != nil {
		t.Error(err)
	}
	n.stopRegistry()
	mid, err := TakeNodeHostState()
	if err != nil {
		t.Fatal(err)
	}
	if len(before.Leftovers(mid)) == 0 {
		t.Fatal("nothing made: the test does not test the sweep")
	}
	if err := sweepNode(s); err != nil {
		t.Error(err)
	}
	after, err := TakeNodeHostState()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range before.Leftovers(after) {
		t.Errorf("left after the sweep: %s", l)
	}
}
