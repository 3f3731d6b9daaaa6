// Package proc holds what local mode's builder, process server and job
// runs share about the processes they start: a Supervisor that contains
// them (process groups killed whole, a parent-death signal, a cgroup each
// with its limits, reaping after a crash), the tail of their output.
package proc

import (
	"context"
	"os/exec"
	"strings"
	"sync"
)

// Run runs cmd as Start does and waits for it, killing it and all it
// started when ctx ends (npm and go start children of their own).
func (s *Supervisor) Run(ctx context.Context, cmd *exec.Cmd, spec Spec) (Exit, error) {
	p, err := s.Start(cmd, spec)
	if err != nil {
		return Exit{}, err
	}
	stop := context.AfterFunc(ctx, p.Kill)
	exit, err := p.Wait()
	stop()
	if ctx.Err() != nil {
		return exit, ctx.Err()
	}
	return exit, err
}

// Tail keeps the last Max bytes written to it.
type Tail struct {
	mu  sync.Mutex
	Max int
	b   []byte
}

func (t *Tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.Max {
		t.b = append([]byte(nil), t.b[len(t.b)-t.Max:]...)
	}
	return len(p), nil
}

func (t *Tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// LastLines is the last n lines of s.
func LastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
