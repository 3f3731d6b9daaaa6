package testbed

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// NodeHostState is what of the host a node run may change, for tests that
// check a teardown left nothing: processes, mounts, links, network
// namespaces, cgroups, sysctls, the host's iptables rules and the paths
// the node's programs create.
type NodeHostState struct {
	Processes []string
	Mounts    []string
	Links     []string
	Netns     []string
	Cgroups   []string
	Sysctls   map[string]string
	Iptables  []string
	Paths     []string
}

// TakeNodeHostState reads the host's state now.
func TakeNodeHostState() (NodeHostState, error) {
	s := NodeHostState{Sysctls: map[string]string{}}
	for pid, cmd := range processesReferencing(nodeBase()) {
		s.Processes = append(s.Processes, fmt.Sprintf("%d %s", pid, cmd))
	}
	for _, m := range mountPoints() {
		for _, p := range []string{nodeBase(), "/run/netns", "/run/containerd", "/var/lib/kubelet"} {
			if m == p || strings.HasPrefix(m, p+"/") {
				s.Mounts = append(s.Mounts, m)
			}
		}
	}
	out, err := run("ip", "-o", "link")
	if err != nil {
		return s, err
	}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if f := strings.Fields(l); len(f) > 1 {
			s.Links = append(s.Links, strings.SplitN(strings.TrimSuffix(f[1], ":"), "@", 2)[0])
		}
	}
	if out, err = run("ip", "netns", "list"); err != nil {
		return s, err
	}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			s.Netns = append(s.Netns, f[0])
		}
	}
	for _, h := range cgroupHierarchies() {
		_ = filepath.WalkDir(h, func(p string, d os.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			// Local mode's process cgroups (pkg/local/proc), made by
			// sless dev in tests running beside the node's: not the node's.
			if strings.HasPrefix(d.Name(), "sless-dev-") {
				return filepath.SkipDir
			}
			s.Cgroups = append(s.Cgroups, p)
			return nil
		})
	}
	for _, k := range nodeSysctls {
		if b, err := os.ReadFile(filepath.Join("/proc/sys", k)); err == nil {
			s.Sysctls[k] = strings.TrimSpace(string(b))
		}
	}
	if out, err = run("iptables-save"); err != nil {
		return s, err
	}
	counters := regexp.MustCompile(`\[\d+:\d+\]`)
	for _, l := range strings.Split(out, "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			s.Iptables = append(s.Iptables, counters.ReplaceAllString(l, ""))
		}
	}
	for _, p := range append([]string{nodeBase(), nodeStatePath()}, nodeHostPaths...) {
		if _, err := os.Lstat(p); err == nil {
			s.Paths = append(s.Paths, p)
		}
	}
	return s, nil
}

// Leftovers lists what after holds that s, taken before a node ran, did
// not: any process of the node, and each added mount, link, namespace,
// cgroup, iptables rule or path, or changed sysctl.
func (s NodeHostState) Leftovers(after NodeHostState) []string {
	var out []string
	for _, p := range after.Processes {
		out = append(out, "process "+p)
	}
	for _, c := range []struct {
		what          string
		before, after []string
	}{
		{"mount", s.Mounts, after.Mounts}, {"link", s.Links, after.Links}, {"netns", s.Netns, after.Netns},
		{"cgroup", s.Cgroups, after.Cgroups}, {"iptables rule added", s.Iptables, after.Iptables},
		{"iptables rule removed", after.Iptables, s.Iptables}, {"path", s.Paths, after.Paths},
	} {
		for _, x := range added(c.before, c.after) {
			out = append(out, c.what+" "+x)
		}
	}
	for k, v := range s.Sysctls {
		if after.Sysctls[k] != v {
			out = append(out, fmt.Sprintf("sysctl %s %s, was %s", k, after.Sysctls[k], v))
		}
	}
	sort.Strings(out)
	return out
}

func added(before, after []string) []string {
	had := map[string]bool{}
	for _, x := range before {
		had[x] = true
	}
	var out []string
	for _, x := range after {
		if !had[x] {
			out = append(out, x)
		}
	}
	return out
}
