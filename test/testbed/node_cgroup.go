package testbed

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const cgroupFS = "/sys/fs/cgroup"

// nodeCgroupRoot is kubelet's cgroupRoot: sless-node under the test
// process's own memory cgroup (cgroups v1), so pods die with the job.
func nodeCgroupRoot() (string, error) {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) == 3 && parts[1] == "memory" {
			return filepath.Join(parts[2], "sless-node"), nil
		}
	}
	return "", errors.New("no memory cgroup (v1) in /proc/self/cgroup: the node bed needs cgroups v1")
}

// cgroupHierarchies are the mounted hierarchies under /sys/fs/cgroup,
// the unified one included.
func cgroupHierarchies() []string {
	entries, _ := os.ReadDir(cgroupFS)
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, filepath.Join(cgroupFS, e.Name()))
		}
	}
	return out
}

// absentCgroups are the directories on the way to root, in every
// hierarchy, that do not exist yet, parents first: the bed, kubelet or
// runc will make them, and teardown removes them.
func absentCgroups(root string) []string {
	var out []string
	for _, h := range cgroupHierarchies() {
		p := h
		for _, part := range strings.Split(strings.Trim(root, "/"), "/") {
			p = filepath.Join(p, part)
			if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
				out = append(out, p)
			}
		}
	}
	return out
}

// makeCgroups creates root in every v1 hierarchy, as kubelet wants its
// cgroupRoot there beforehand; a new cpuset level needs cpus and mems
// before a task can join it, copied from the hierarchy's root.
func makeCgroups(root string) error {
	for _, h := range cgroupHierarchies() {
		if filepath.Base(h) == "unified" {
			continue
		}
		p := h
		for _, part := range strings.Split(strings.Trim(root, "/"), "/") {
			p = filepath.Join(p, part)
			if err := os.Mkdir(p, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
				return err
			}
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				if cur, err := os.ReadFile(filepath.Join(p, f)); err == nil && strings.TrimSpace(string(cur)) == "" {
					v, err := os.ReadFile(filepath.Join(h, f))
					if err != nil {
						return err
					}
					if err := os.WriteFile(filepath.Join(p, f), v, 0o644); err != nil {
						return fmt.Errorf("%s: %w", filepath.Join(p, f), err)
					}
				}
			}
		}
	}
	return nil
}

// killCgroups kills every process in root's subtree, in every hierarchy,
// until none is left (containers and their shims' children).
func killCgroups(root string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		pids := cgroupPids(root)
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes left in cgroup %s: %v", root, pids)
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func cgroupPids(root string) []int {
	seen := map[int]bool{}
	for _, h := range cgroupHierarchies() {
		_ = filepath.WalkDir(filepath.Join(h, root), func(p string, d os.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			b, _ := os.ReadFile(filepath.Join(p, "cgroup.procs"))
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil && pid != os.Getpid() {
					seen[pid] = true
				}
			}
			return nil
		})
	}
	out := make([]int, 0, len(seen))
	for pid := range seen {
		out = append(out, pid)
	}
	sort.Ints(out)
	return out
}

// removeCgroups removes root's subtree in every hierarchy, deepest first,
// then the directories the bed recorded as made on the way.
func removeCgroups(root string, made []string) error {
	var dirs []string
	for _, h := range cgroupHierarchies() {
		_ = filepath.WalkDir(filepath.Join(h, root), func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
	}
	sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
	for i := len(made) - 1; i >= 0; i-- {
		dirs = append(dirs, made[i])
	}
	var errs []error
	for _, d := range dirs {
		// A cgroup just emptied of tasks can be busy for a moment.
		var err error
		for try := 0; try < 20; try++ {
			if err = syscall.Rmdir(d); err == nil || errors.Is(err, syscall.ENOENT) || !errors.Is(err, syscall.EBUSY) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err != nil && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("rmdir %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}
