//go:build linux

package proc

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// Linux's part: the parent-death signal, birth in a cgroup, rlimits of
// another process and a wait that does not reap. Elsewhere (sys_other.go)
// processes get their group only, and no cgroups are made.

const haveCgroups = true

func setDeathSignal(attr *syscall.SysProcAttr) { attr.Pdeathsig = syscall.SIGKILL }

func setCgroupFD(attr *syscall.SysProcAttr, fd int) {
	attr.UseCgroupFD = true
	attr.CgroupFD = fd
}

func gettid() int { return unix.Gettid() }

// limitData sets pid's RLIMIT_DATA.
func limitData(pid int, bytes int64) error {
	lim := uint64(bytes)
	return unix.Prlimit(pid, unix.RLIMIT_DATA, &unix.Rlimit{Cur: lim, Max: lim}, nil)
}

// awaitExit returns once pid has exited, leaving it unreaped.
func awaitExit(pid int) {
	var info unix.Siginfo
	for unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil) == unix.EINTR {
	}
}
