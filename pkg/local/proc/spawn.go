package proc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
)

// The kernel sends a child's parent-death signal when the thread that
// forked it exits, not the process; Go retires threads (one a goroutine
// exited locked to, for one). So every child is forked by one goroutine
// locked to a thread that never exits, and the signal comes only when
// sless dev itself dies.
var (
	spawnOnce sync.Once
	spawnReq  chan spawnCall
)

type spawnCall struct {
	cmd *exec.Cmd
	// into and home are v1 cgroup directories: the child's, and the
	// spawning thread's own to go back to.
	into, home []string
	done       chan error
}

func spawner() {
	runtime.LockOSThread() // never unlocked: the thread lives as long as the process
	for c := range spawnReq {
		c.done <- spawn(c)
	}
}

// spawn starts c.cmd. A v1 cgroup takes a process only once it runs, by
// which time it may have forked (a shell at once); a child is born in its
// parent thread's cgroups, so the thread moves there for the fork and
// back after.
func spawn(c spawnCall) error {
	if len(c.into) == 0 {
		return c.cmd.Start()
	}
	tid := []byte(strconv.Itoa(gettid()))
	back := func() error {
		var errs []error
		for _, d := range c.home {
			if err := os.WriteFile(filepath.Join(d, "tasks"), tid, 0); err != nil {
				errs = append(errs, fmt.Errorf("move sless dev's spawning thread back to cgroup %s: %w", d, err))
			}
		}
		return errors.Join(errs...)
	}
	for _, d := range c.into {
		if err := os.WriteFile(filepath.Join(d, "tasks"), tid, 0); err != nil {
			return errors.Join(fmt.Errorf("move into cgroup %s: %w", d, err), back())
		}
	}
	err := c.cmd.Start()
	if berr := back(); berr != nil {
		if err == nil {
			_ = c.cmd.Process.Kill()
			_ = c.cmd.Wait()
		}
		return errors.Join(err, berr)
	}
	return err
}

// start starts cmd, in the v1 cgroups into if any, in its own process group (a Ctrl-C at the terminal
// reaches sless dev, which drains its functions, and a kill reaches the
// process's children too), killed by SIGKILL if sless dev dies.
func start(cmd *exec.Cmd, into, home []string) error {
	spawnOnce.Do(func() {
		spawnReq = make(chan spawnCall)
		go spawner()
	})
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	setDeathSignal(cmd.SysProcAttr)
	c := spawnCall{cmd: cmd, into: into, home: home, done: make(chan error, 1)}
	spawnReq <- c
	return <-c.done
}
