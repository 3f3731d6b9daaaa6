//go:build !linux

package proc

import (
	"errors"
	"syscall"
)

const haveCgroups = false

func setDeathSignal(*syscall.SysProcAttr) {}

func setCgroupFD(*syscall.SysProcAttr, int) {}

func gettid() int { return 0 }

func limitData(int, int64) error { return errors.New("RLIMIT_DATA of another process is Linux's") }

func awaitExit(int) {}
