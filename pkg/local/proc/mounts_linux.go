//go:build linux

package proc

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// A process with mounts starts as this binary again (/proc/self/exe) in a
// mount namespace of its own, with mountsEnv naming what to mount; init
// below builds its view of the file system and execs the program. The
// host's file system is never written: the view is a tmpfs root whose
// entries are bind mounts of the host's, and each directory on the way to a
// mount point that the host lacks is made in a tmpfs laid over its parent.
const mountsEnv = "SLESS_PROC_MOUNTS"

// mountPlan is what the re-executed child reads from mountsEnv.
type mountPlan struct {
	Root   string  `json:"root"`
	Mounts []Mount `json:"mounts"`
}

func init() {
	raw, ok := os.LookupEnv(mountsEnv)
	if !ok {
		return
	}
	os.Unsetenv(mountsEnv)
	runtime.LockOSThread()
	if err := enterMounts(raw); err != nil {
		fmt.Fprintf(os.Stderr, "sless dev: mount the volumes: %v\n", err)
		os.Exit(126)
	}
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "sless dev: mount the volumes: no program to run")
		os.Exit(126)
	}
	// The helper's ambient capabilities must not reach the function.
	_ = unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
	err := syscall.Exec(os.Args[1], os.Args[2:], os.Environ())
	fmt.Fprintf(os.Stderr, "sless dev: run %s: %v\n", os.Args[1], err)
	os.Exit(127)
}

// withMounts makes cmd start through the helper in a new mount namespace
// (and, when sless dev is not root, a user namespace mapping its own ids,
// with the capabilities to mount), with its view rooted at root, an empty
// directory the caller removes after.
func withMounts(cmd *exec.Cmd, root string, mounts []Mount) error {
	if len(mounts) == 0 {
		return nil
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find sless dev's own program to mount volumes with: %w", err)
	}
	raw, err := json.Marshal(mountPlan{Root: root, Mounts: mounts})
	if err != nil {
		return err
	}
	path := cmd.Path
	if path == "" || !filepath.IsAbs(path) {
		if path, err = exec.LookPath(cmd.Args[0]); err != nil {
			return err
		}
	}
	cmd.Args = append([]string{"sless-volumes", path}, cmd.Args...)
	cmd.Path = self
	cmd.Env = append(envOf(cmd), mountsEnv+"="+string(raw))
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	attr := cmd.SysProcAttr
	attr.Cloneflags |= syscall.CLONE_NEWNS
	if uid, gid := os.Getuid(), os.Getgid(); uid != 0 {
		attr.Cloneflags |= syscall.CLONE_NEWUSER
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
		attr.GidMappingsEnableSetgroups = false
		attr.AmbientCaps = []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_SYS_CHROOT}
	}
	return nil
}

// enterMounts builds the view plan describes and enters it.
func enterMounts(raw string) error {
	var plan mountPlan
	if err := json.Unmarshal([]byte(raw), &plan); err != nil {
		return err
	}
	cwd, err := os.Getwd()
	if err != nil {
		return err
	}
	// Nothing done here may reach the host's namespace.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make / private: %w", err)
	}
	v := &view{root: plan.Root, opened: map[string]bool{}}
	if err := v.open("/"); err != nil {
		return err
	}
	sort.Slice(plan.Mounts, func(i, j int) bool { return plan.Mounts[i].Target < plan.Mounts[j].Target })
	for _, m := range plan.Mounts {
		if err := v.mount(m); err != nil {
			return fmt.Errorf("%s: %w", m.Target, err)
		}
	}
	if err := unix.Chroot(plan.Root); err != nil {
		return fmt.Errorf("enter the view: %w", err)
	}
	if err := os.Chdir(cwd); err != nil {
		return fmt.Errorf("the working directory %s is hidden by a volume: %w", cwd, err)
	}
	return nil
}

// view is a process's file system under root: directories it opened are
// tmpfs (writable, private), the rest bind mounts of the host's.
type view struct {
	root   string
	opened map[string]bool
}

func (v *view) at(p string) string { return filepath.Join(v.root, p) }

// open lays a tmpfs over the view's dir and binds each of the host's
// entries of dir into it, so that new entries can be made there.
func (v *view) open(dir string) error {
	if v.opened[dir] {
		return nil
	}
	at := v.at(dir)
	if dir != "/" {
		if err := unix.Unmount(at, unix.MNT_DETACH); err != nil {
			return fmt.Errorf("open %s: %w", dir, err)
		}
	}
	if err := unix.Mount("tmpfs", at, "tmpfs", 0, "mode=0755"); err != nil {
		return fmt.Errorf("open %s: %w", dir, err)
	}
	v.opened[dir] = true
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		host := filepath.Join(dir, e.Name())
		if host == v.root {
			continue
		}
		if err := v.replicate(host); err != nil {
			return err
		}
	}
	return nil
}

// replicate puts host path p into the view: a directory or file bound, a
// symbolic link made again; sockets and devices outside /dev are left out.
func (v *view) replicate(p string) error {
	fi, err := os.Lstat(p)
	if err != nil {
		return nil // gone meanwhile
	}
	at := v.at(p)
	switch {
	case fi.Mode()&os.ModeSymlink != 0:
		target, err := os.Readlink(p)
		if err != nil {
			return err
		}
		return os.Symlink(target, at)
	case fi.IsDir():
		if err := os.Mkdir(at, fi.Mode().Perm()); err != nil {
			return err
		}
	case fi.Mode().IsRegular():
		f, err := os.OpenFile(at, os.O_CREATE|os.O_WRONLY, fi.Mode().Perm())
		if err != nil {
			return err
		}
		f.Close()
	default:
		return nil
	}
	if err := unix.Mount(p, at, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s: %w", p, err)
	}
	return nil
}

// mount makes m.Target in the view, opening the directories on its way,
// and mounts m there.
func (v *view) mount(m Mount) error {
	parts := strings.Split(strings.TrimPrefix(filepath.Clean(m.Target), "/"), "/")
	dir := "/"
	for i, name := range parts {
		next := filepath.Join(dir, name)
		fi, err := os.Lstat(v.at(next))
		last := i == len(parts)-1
		switch {
		case err == nil && fi.Mode()&os.ModeSymlink != 0:
			return fmt.Errorf("%s is a symbolic link on this machine; choose a mountPath without one", next)
		case err == nil && !fi.IsDir():
			return fmt.Errorf("%s is a file on this machine; choose another mountPath", next)
		case err == nil && last:
			// An existing directory is mounted over, as in a container.
		case err == nil:
			if !v.opened[next] {
				if err := v.open(next); err != nil {
					return err
				}
			}
		case errors.Is(err, os.ErrNotExist):
			if err := v.open(dir); err != nil {
				return err
			}
			if err := os.Mkdir(v.at(next), 0o755); err != nil {
				return err
			}
			v.opened[next] = true // a directory of its parent's tmpfs
		default:
			return err
		}
		dir = next
	}
	at := v.at(m.Target)
	if m.TmpfsBytes > 0 || m.Source == "" {
		opts := "mode=1777"
		if m.TmpfsBytes > 0 {
			opts += fmt.Sprintf(",size=%d", m.TmpfsBytes)
		}
		return unix.Mount("tmpfs", at, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts)
	}
	if err := unix.Mount(m.Source, at, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s: %w", m.Source, err)
	}
	if m.ReadOnly {
		if err := unix.Mount("", at, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("make read-only: %w", err)
		}
	}
	return nil
}
