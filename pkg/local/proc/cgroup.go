package proc

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The controllers a function's limits need.
const (
	ctlMemory = "memory"
	ctlCPU    = "cpu"
	ctlPids   = "pids"
)

var wantControllers = []string{ctlMemory, ctlCPU, ctlPids}

// cgroups is this run's subtree in each cgroup hierarchy it may use: the
// unified (v2) one, which holds every process for containment and the
// controllers enabled there, and on a hybrid or legacy host the v1
// hierarchies of the controllers v2 lacks. Each subtree is a child of
// sless dev's own cgroup in that hierarchy: never the host's.
type cgroups struct {
	v2    string          // this run's subtree in the unified hierarchy; "" none
	v2ctl map[string]bool // controllers enabled for the v2 subtree's children
	v1    map[string]string
	// v1home maps a v1 subtree to sless dev's own cgroup it was made in.
	v1home map[string]string
	// missing says why a controller (or containment, key "") is not had.
	missing map[string]string
}

// subtrees lists every subtree directory of c.
func (c *cgroups) subtrees() []string {
	var out []string
	if c.v2 != "" {
		out = append(out, c.v2)
	}
	for _, d := range c.v1 {
		if !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	slices.Sort(out)
	return out
}

type mountPoint struct{ root, dir string }

// cgroupMounts reads where the unified hierarchy and each v1 controller's
// hierarchy are mounted.
func cgroupMounts() (v2 *mountPoint, v1 map[string]*mountPoint, err error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	v1 = map[string]*mountPoint{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent maj:min root mountpoint opts... - fstype source superopts
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fs, pf := strings.Fields(post), strings.Fields(pre)
		if !ok || len(fs) < 3 || len(pf) < 5 {
			continue
		}
		mp := &mountPoint{root: pf[3], dir: pf[4]}
		switch fs[0] {
		case "cgroup2":
			if v2 == nil {
				v2 = mp
			}
		case "cgroup":
			for _, o := range strings.Split(fs[2], ",") {
				if slices.Contains(wantControllers, o) && v1[o] == nil {
					v1[o] = mp
				}
			}
		}
	}
	return v2, v1, sc.Err()
}

// ownCgroups reads /proc/self/cgroup: the unified path and each v1
// controller's path.
func ownCgroups() (v2 string, v1 map[string]string, err error) {
	raw, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", nil, err
	}
	v1 = map[string]string{}
	v2 = "-"
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			v2 = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			v1[c] = parts[2]
		}
	}
	return v2, v1, nil
}

// within is the directory of cgroup path p under mount m, or "" when the
// mount does not show it.
func within(m *mountPoint, p string) string {
	if m == nil || p == "" || p == "-" {
		return ""
	}
	rel, ok := strings.CutPrefix(p, m.root)
	if !ok {
		return ""
	}
	return filepath.Join(m.dir, rel)
}

// underSystemd tells whether systemd manages this host's cgroups: it then
// owns every cgroup but the ones it delegates, and removes or moves
// others' at will.
func underSystemd() bool {
	_, err := os.Stat("/run/systemd/system")
	return err == nil
}

// delegated tells whether systemd delegated dir (Delegate=yes), which it
// marks with an extended attribute.
func delegated(dir string) bool {
	for _, attr := range []string{"trusted.delegate", "user.delegate"} {
		buf := make([]byte, 8)
		if n, err := unix.Getxattr(dir, attr, buf); err == nil && string(buf[:n]) == "1" {
			return true
		}
	}
	return false
}

// openCgroups makes this run's subtree, name, under sless dev's own cgroup
// in each hierarchy it may write. What it cannot have is in missing.
func openCgroups(name string) *cgroups {
	c := &cgroups{v2ctl: map[string]bool{}, v1: map[string]string{}, v1home: map[string]string{}, missing: map[string]string{}}
	fail := func(why string) *cgroups {
		c.missing[""] = why
		return c
	}
	m2, m1, err := cgroupMounts()
	if err != nil {
		return fail("cannot read the cgroup mounts: " + err.Error())
	}
	own2, own1, err := ownCgroups()
	if err != nil {
		return fail("cannot read /proc/self/cgroup: " + err.Error())
	}
	systemd := underSystemd()
	if dir := within(m2, own2); dir != "" {
		if systemd && !delegated(dir) {
			return fail(fmt.Sprintf("systemd manages cgroup %s and did not delegate it to sless dev "+
				"(run it with Delegate=yes, e.g. systemd-run --user --scope -p Delegate=yes sless dev)", own2))
		}
		c.openV2(dir, own2 == "/", name)
	} else if m2 != nil {
		c.missing[""] = "sless dev's own cgroup is not visible in " + m2.dir
	}
	for _, ctl := range wantControllers {
		if c.v2ctl[ctl] {
			continue
		}
		dir := within(m1[ctl], own1[ctl])
		if dir == "" {
			if _, ok := c.missing[ctl]; !ok {
				c.missing[ctl] = "the " + ctl + " controller is not available"
			}
			continue
		}
		if systemd && !delegated(dir) {
			c.missing[ctl] = "systemd manages " + dir + " and did not delegate it"
			continue
		}
		sub := filepath.Join(dir, name)
		if err := mkdirCgroup(sub); err != nil {
			c.missing[ctl] = err.Error()
			continue
		}
		c.v1[ctl] = sub
		c.v1home[sub] = dir
		delete(c.missing, ctl)
	}
	if c.v2 == "" && len(c.v1) == 0 {
		if _, ok := c.missing[""]; !ok {
			c.missing[""] = "no cgroup hierarchy is writable"
		}
	}
	return c
}

// openV2 makes the unified subtree and enables in it the controllers that
// sless dev's own cgroup (dir) hands down. It enables them in dir itself
// only when dir is not a hierarchy's root (a host-wide setting) and, if
// dir holds processes, only when they are all sless dev's: it then moves
// itself into a leaf, as a delegated service must (a cgroup with
// processes cannot hand controllers down).
func (c *cgroups) openV2(dir string, isRoot bool, name string) {
	sub := filepath.Join(dir, name)
	if err := mkdirCgroup(sub); err != nil {
		c.missing[""] = err.Error()
		return
	}
	c.v2 = sub
	avail := fieldsOf(filepath.Join(dir, "cgroup.controllers"))
	enabled := fieldsOf(filepath.Join(dir, "cgroup.subtree_control"))
	for _, ctl := range wantControllers {
		switch {
		case !slices.Contains(avail, ctl):
			c.missing[ctl] = "the " + ctl + " controller is not available in " + dir
			continue
		case !slices.Contains(enabled, ctl) && isRoot:
			c.missing[ctl] = "the " + ctl + " controller is not enabled in " + dir + " (the hierarchy's root, which sless dev leaves alone)"
			continue
		case !slices.Contains(enabled, ctl):
			if err := enableController(dir, ctl); err != nil {
				c.missing[ctl] = err.Error()
				continue
			}
		}
		if err := os.WriteFile(filepath.Join(sub, "cgroup.subtree_control"), []byte("+"+ctl), 0); err != nil {
			c.missing[ctl] = fmt.Sprintf("enable %s in %s: %v", ctl, sub, err)
			continue
		}
		c.v2ctl[ctl] = true
	}
}

// enableController hands ctl down from dir to its children, moving sless
// dev into a leaf of dir first when it is dir's only process.
func enableController(dir, ctl string) error {
	ctlFile := filepath.Join(dir, "cgroup.subtree_control")
	err := os.WriteFile(ctlFile, []byte("+"+ctl), 0)
	if err == nil || !errors.Is(err, syscall.EBUSY) {
		if err != nil {
			return fmt.Errorf("enable %s in %s: %w", ctl, dir, err)
		}
		return nil
	}
	for _, p := range fieldsOf(filepath.Join(dir, "cgroup.procs")) {
		if p != strconv.Itoa(os.Getpid()) {
			return fmt.Errorf("%s cannot hand %s down: it holds processes other than sless dev", dir, ctl)
		}
	}
	leaf := filepath.Join(dir, "sless-dev-server")
	if err := mkdirCgroup(leaf); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
		return fmt.Errorf("move sless dev into %s: %w", leaf, err)
	}
	if err := os.WriteFile(ctlFile, []byte("+"+ctl), 0); err != nil {
		return fmt.Errorf("enable %s in %s: %w", ctl, dir, err)
	}
	return nil
}

func mkdirCgroup(dir string) error {
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("create cgroup %s: %w", dir, err)
	}
	return nil
}

func fieldsOf(file string) []string {
	raw, _ := os.ReadFile(file)
	return strings.Fields(string(raw))
}

// Limits bound one process (and its children).
type Limits struct {
	// MemoryBytes is the most memory it may use (and no swap); past it the
	// kernel kills it (OOMKilled). 0: no limit.
	MemoryBytes int64
	// CPURequestMilli is its share of CPU under contention, as a pod's CPU
	// request is (cpu.weight, cpu.shares). 0: the default share.
	CPURequestMilli int64
	// CPULimitMilli caps its CPU time per period (cpu.max). 0: no cap.
	CPULimitMilli int64
	// Pids is the most processes and threads it may have. 0: no limit.
	Pids int64
}

// group is one process's cgroup in each hierarchy of a cgroups.
type group struct {
	v2 string
	v1 []string
	// v1home are sless dev's own cgroups in v1's hierarchies.
	v1home []string
	// memDir holds the memory controller's files; memV2 tells their names.
	memDir string
	memV2  bool
}

// dirs lists the group's directories.
func (g *group) dirs() []string {
	var out []string
	if g.v2 != "" {
		out = append(out, g.v2)
	}
	return append(out, g.v1...)
}

// newGroup makes the cgroup of one process, id, with lim applied.
func (c *cgroups) newGroup(id string, lim Limits) (*group, error) {
	g := &group{}
	mk := func(parent string) (string, error) {
		dir := filepath.Join(parent, id)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return "", fmt.Errorf("create cgroup %s: %w", dir, err)
		}
		return dir, nil
	}
	var err error
	if c.v2 != "" {
		if g.v2, err = mk(c.v2); err != nil {
			return nil, err
		}
	}
	dirOf := map[string]string{}
	for _, ctl := range wantControllers {
		switch {
		case c.v2ctl[ctl]:
			dirOf[ctl] = g.v2
		case c.v1[ctl] != "":
			d := filepath.Join(c.v1[ctl], id)
			if !slices.Contains(g.v1, d) {
				if _, err := mk(c.v1[ctl]); err != nil {
					g.remove()
					return nil, err
				}
				g.v1 = append(g.v1, d)
				g.v1home = append(g.v1home, c.v1home[c.v1[ctl]])
			}
			dirOf[ctl] = d
		}
	}
	if err := g.apply(dirOf, c.v2ctl, lim); err != nil {
		g.remove()
		return nil, err
	}
	return g, nil
}

// apply writes lim into the controllers' files (dirOf maps a controller to
// its directory; v2 tells which are unified).
func (g *group) apply(dirOf map[string]string, v2 map[string]bool, lim Limits) error {
	write := func(dir, file, val string) error {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(val), 0); err != nil {
			return fmt.Errorf("cgroup %s: %w", file, err)
		}
		return nil
	}
	exists := func(dir, file string) bool {
		_, err := os.Stat(filepath.Join(dir, file))
		return err == nil
	}
	if d := dirOf[ctlMemory]; d != "" {
		g.memDir, g.memV2 = d, v2[ctlMemory]
		if lim.MemoryBytes > 0 {
			v := strconv.FormatInt(lim.MemoryBytes, 10)
			if g.memV2 {
				if err := write(d, "memory.max", v); err != nil {
					return err
				}
				// Swapping past the limit would hide it, as on a node without swap.
				if exists(d, "memory.swap.max") {
					if err := write(d, "memory.swap.max", "0"); err != nil {
						return err
					}
				}
			} else {
				if err := write(d, "memory.limit_in_bytes", v); err != nil {
					return err
				}
				if exists(d, "memory.memsw.limit_in_bytes") {
					if err := write(d, "memory.memsw.limit_in_bytes", v); err != nil {
						return err
					}
				}
			}
		}
	}
	if d := dirOf[ctlCPU]; d != "" {
		// The kubelet's conversion: a request of 1 CPU is 1024 shares.
		if lim.CPURequestMilli > 0 {
			shares := max(lim.CPURequestMilli*1024/1000, 2)
			if v2[ctlCPU] {
				weight := 1 + (shares-2)*9999/262142
				if err := write(d, "cpu.weight", strconv.FormatInt(weight, 10)); err != nil {
					return err
				}
			} else if err := write(d, "cpu.shares", strconv.FormatInt(shares, 10)); err != nil {
				return err
			}
		}
		if lim.CPULimitMilli > 0 {
			const period = 100000
			quota := max(lim.CPULimitMilli*period/1000, 1000)
			if v2[ctlCPU] {
				if err := write(d, "cpu.max", fmt.Sprintf("%d %d", quota, period)); err != nil {
					return err
				}
			} else {
				if err := write(d, "cpu.cfs_period_us", strconv.Itoa(period)); err != nil {
					return err
				}
				if err := write(d, "cpu.cfs_quota_us", strconv.FormatInt(quota, 10)); err != nil {
					return err
				}
			}
		}
	}
	if d := dirOf[ctlPids]; d != "" && lim.Pids > 0 {
		if err := write(d, "pids.max", strconv.FormatInt(lim.Pids, 10)); err != nil {
			return err
		}
	}
	return nil
}

// oomKills counts the processes of the group the kernel killed for
// exceeding its memory limit.
func (g *group) oomKills() int {
	if g.memDir == "" {
		return 0
	}
	file := "memory.oom_control"
	if g.memV2 {
		file = "memory.events"
	}
	raw, _ := os.ReadFile(filepath.Join(g.memDir, file))
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}

// kill kills every process in the group, not waiting for them to go.
func (g *group) kill() {
	for _, d := range g.dirs() {
		killCgroup(d)
	}
}

// killCgroup kills every process in dir: at once with cgroup.kill (v2,
// Linux 5.14, forks racing it included), else one by one; it returns
// what cgroup.procs held.
func killCgroup(dir string) []string {
	_ = os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0)
	pids := fieldsOf(filepath.Join(dir, "cgroup.procs"))
	for _, p := range pids {
		if n, err := strconv.Atoi(p); err == nil {
			_ = syscall.Kill(n, syscall.SIGKILL)
		}
	}
	return pids
}

// remove kills what is left in the group and removes its directories.
func (g *group) remove() error {
	var errs []error
	for _, d := range g.dirs() {
		errs = append(errs, removeCgroup(d))
	}
	return errors.Join(errs...)
}

// removeCgroup kills every process in dir and below, waits for them to
// leave, and removes the directories. A missing dir is no error.
func removeCgroup(dir string) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	var errs []error
	for _, e := range ents {
		if e.IsDir() {
			errs = append(errs, removeCgroup(filepath.Join(dir, e.Name())))
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	wait := time.Millisecond
	for {
		if pids := killCgroup(dir); len(pids) == 0 {
			err := os.Remove(dir)
			if err == nil || errors.Is(err, os.ErrNotExist) {
				return errors.Join(errs...)
			}
			if !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
				return errors.Join(append(errs, fmt.Errorf("remove cgroup %s: %w", dir, err))...)
			}
		} else if time.Now().After(deadline) {
			return errors.Join(append(errs, fmt.Errorf("cgroup %s: processes %s outlived SIGKILL for 10 s", dir, strings.Join(pids, " ")))...)
		}
		time.Sleep(wait)
		wait = min(wait*2, 50*time.Millisecond)
	}
}
