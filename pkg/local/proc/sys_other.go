//go:build !linux

package proc

import (
	"errors"
	"os/exec"
	"syscall"
)

const haveCgroups = false

func setDeathSignal(*syscall.SysProcAttr) {}

func setCgroupFD(*syscall.SysProcAttr, int) {}

func gettid() int { return 0 }

func limitData(int, int64) error { return errors.New("RLIMIT_DATA of another process is Linux's") }

func awaitExit(int) {}

func withMounts(*exec.Cmd, string, []Mount) error {
	return errors.New("volumes in local mode need Linux's mount namespaces")
}
