package proc

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Supervisor starts the processes of one sless dev and keeps them
// contained, so that none outlives it for long:
//
//   - each dies with sless dev (a parent-death signal) and runs in its own
//     process group;
//   - each runs in a cgroup of its own under sless dev's cgroup, when sless
//     dev may make them, which bounds its memory, CPU and processes and
//     holds its children too;
//   - each is written down in the run directory (pid, start time, boot, cgroup)
//     until it is reaped, so that a sless dev started after one that was
//     killed stops what the dead one left (NewSupervisor).
//
// A nil *Supervisor starts processes with the signal and the group only.
type Supervisor struct {
	dir    string // run directory: procs/, tmp/, cgroups.json
	cg     *cgroups
	bootID string
	seq    atomic.Uint64
	// rlimitMemory: memory limits fall back to RLIMIT_DATA.
	rlimitMemory bool
	warning      string
	reaped       int

	mu     sync.Mutex
	closed bool
}

// SupervisorOptions configure NewSupervisor.
type SupervisorOptions struct {
	// NoCgroups makes no cgroups, as where sless dev may not: limits fall
	// back to rlimits (tests of that path use it).
	NoCgroups bool
}

// NewSupervisor reaps what an earlier sless dev of the same run directory
// left running, then sets up this run's cgroups. The caller holds the data
// directory's lock: another live sless dev's processes would be reaped too.
func NewSupervisor(dir string, opts SupervisorOptions) (*Supervisor, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(abs, "procs"), 0o700); err != nil {
		return nil, fmt.Errorf("run directory: %w", err)
	}
	s := &Supervisor{dir: abs, bootID: bootID()}
	if s.reaped, err = s.reap(); err != nil {
		return nil, err
	}
	switch {
	case opts.NoCgroups:
		s.cg = &cgroups{missing: map[string]string{"": "cgroups are turned off"}}
	case !haveCgroups:
		s.cg = &cgroups{missing: map[string]string{"": "cgroups are Linux's"}}
	default:
		sum := sha256.Sum256([]byte(abs))
		s.cg = openCgroups("sless-dev-" + hex.EncodeToString(sum[:6]))
		raw, _ := json.Marshal(s.cg.subtrees())
		if err := writeFileAtomic(filepath.Join(abs, "cgroups.json"), raw); err != nil {
			return nil, err
		}
	}
	s.rlimitMemory = haveCgroups && !s.cg.has(ctlMemory)
	s.warning = s.cg.warning()
	return s, nil
}

// has tells whether processes get ctl's cgroup.
func (c *cgroups) has(ctl string) bool { return c.v2ctl[ctl] || c.v1[ctl] != "" }

// warning says what is not enforced, "" when all is.
func (c *cgroups) warning() string {
	var lost []string
	switch {
	case !c.has(ctlMemory) && haveCgroups:
		lost = append(lost, "memory limits are enforced by RLIMIT_DATA (an allocation past memoryMB fails; nothing is OOM-killed)")
	case !c.has(ctlMemory):
		lost = append(lost, "memoryMB is not enforced")
	}
	if !c.has(ctlCPU) {
		lost = append(lost, "cpu is not enforced")
	}
	if !c.has(ctlPids) {
		lost = append(lost, "the process count is not limited")
	}
	switch {
	case !haveCgroups:
		lost = append(lost, "a function's processes may outlive sless dev if it is killed")
	case c.v2 == "" && len(c.v1) == 0:
		lost = append(lost, "a function's children may outlive it if sless dev is killed (they are stopped at its next start)")
	}
	if len(lost) == 0 {
		return ""
	}
	var why []string
	if w := c.missing[""]; w != "" {
		why = append(why, w)
	}
	for _, ctl := range wantControllers {
		if w := c.missing[ctl]; w != "" && !c.has(ctl) && c.missing[""] == "" {
			why = append(why, w)
		}
	}
	return fmt.Sprintf("%s (%s)", strings.Join(lost, "; "), strings.Join(why, "; "))
}

// Warning says, in one sentence, which limits are not enforced and why;
// "" when all are.
func (s *Supervisor) Warning() string {
	if s == nil {
		return ""
	}
	return s.warning
}

// Reaped is how many processes an earlier run left that NewSupervisor stopped.
func (s *Supervisor) Reaped() int {
	if s == nil {
		return 0
	}
	return s.reaped
}

// Close removes this run's cgroups once no process is left in them; what
// it cannot remove the next start reaps.
func (s *Supervisor) Close() error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	var errs []error
	for _, d := range s.cg.subtrees() {
		errs = append(errs, removeCgroup(d))
	}
	if errors.Join(errs...) == nil {
		_ = os.Remove(filepath.Join(s.dir, "cgroups.json"))
	}
	return errors.Join(errs...)
}

// Spec is what a process is started with beyond its command.
type Spec struct {
	// Name tells the process apart in its cgroup's and files' names
	// (e.g. "fn.default.hello.hello-00001").
	Name string
	// Limits bound it; zero: none.
	Limits Limits
	// TempDir gives it a private temporary directory (TMPDIR), removed
	// when it exits, as a container's /tmp goes with it.
	TempDir bool
	// Mounts are what the process sees at paths of its own (a function's
	// volumes), in a mount namespace of its own (mounts_linux.go).
	Mounts []Mount
}

// Mount is one directory a process sees at Target: Source bound there
// (read-only if ReadOnly), or, with no Source, a tmpfs of its own of at
// most TmpfsBytes (0: the kernel's default, half the memory).
type Mount struct {
	Target     string `json:"target"`
	Source     string `json:"source,omitempty"`
	ReadOnly   bool   `json:"readOnly,omitempty"`
	TmpfsBytes int64  `json:"tmpfsBytes,omitempty"`
}

// Process is one process a Supervisor started.
type Process struct {
	Cmd    *exec.Cmd
	cg     *group
	record string
	tmp    string
	root   string
	once   sync.Once
	exit   Exit
	err    error
}

// Exit is how a Process ended beyond its exit status.
type Exit struct {
	// OOMKilled: the kernel killed it for exceeding its memory limit.
	OOMKilled bool
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// Start starts cmd as spec says.
func (s *Supervisor) Start(cmd *exec.Cmd, spec Spec) (*Process, error) {
	p := &Process{Cmd: cmd}
	if cmd.WaitDelay == 0 {
		cmd.WaitDelay = 2 * time.Second
	}
	if s == nil {
		if len(spec.Mounts) > 0 {
			return nil, errors.New("volumes need sless dev's process supervisor, which keeps their roots")
		}
		if err := start(cmd, nil, nil); err != nil {
			return nil, err
		}
		return p, nil
	}
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil, errors.New("the process supervisor is closed")
	}
	id := fmt.Sprintf("%d-%s", s.seq.Add(1), strings.Trim(unsafeName.ReplaceAllString(spec.Name, "_"), "_."))
	if len(id) > 200 {
		id = id[:200]
	}
	if spec.TempDir {
		p.tmp = filepath.Join(s.dir, "tmp", id)
		if err := os.MkdirAll(p.tmp, 0o700); err != nil {
			return nil, fmt.Errorf("temporary directory: %w", err)
		}
		cmd.Env = append(envOf(cmd), "TMPDIR="+p.tmp)
	}
	if len(spec.Mounts) > 0 {
		p.root = filepath.Join(s.dir, "roots", id)
		if err := os.MkdirAll(p.root, 0o700); err != nil {
			p.cleanup()
			return nil, fmt.Errorf("the root of the process's volumes: %w", err)
		}
		if err := withMounts(cmd, p.root, spec.Mounts); err != nil {
			p.cleanup()
			return nil, err
		}
	}
	if s.cg.v2 != "" || len(s.cg.v1) > 0 {
		g, err := s.cg.newGroup(id, spec.Limits)
		if err != nil {
			p.cleanup()
			return nil, err
		}
		p.cg = g
	}
	var fd *os.File
	if p.cg != nil && p.cg.v2 != "" {
		var err error
		if fd, err = os.Open(p.cg.v2); err != nil {
			p.cleanup()
			return nil, fmt.Errorf("open cgroup: %w", err)
		}
		if cmd.SysProcAttr == nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{}
		}
		setCgroupFD(cmd.SysProcAttr, int(fd.Fd()))
	}
	var into, home []string
	if p.cg != nil {
		into, home = p.cg.v1, p.cg.v1home
	}
	err := start(cmd, into, home)
	if fd != nil {
		fd.Close()
	}
	if err != nil {
		p.cleanup()
		return nil, err
	}
	pid := cmd.Process.Pid
	p.record = filepath.Join(s.dir, "procs", id+".json")
	rec := procRecord{Pid: pid, Start: startTime(pid), Boot: s.bootID, TempDir: p.tmp}
	if p.cg != nil {
		rec.Cgroups = p.cg.dirs()
	}
	raw, _ := json.Marshal(rec)
	werr := writeFileAtomic(p.record, raw)
	if werr == nil && s.rlimitMemory && spec.Limits.MemoryBytes > 0 {
		if err := limitData(pid, spec.Limits.MemoryBytes); err != nil {
			werr = fmt.Errorf("limit the memory of process %d: %w", pid, err)
		}
	}
	if werr != nil {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		_ = cmd.Wait()
		p.cleanup()
		return nil, werr
	}
	return p, nil
}

// envOf is cmd's environment as it will be given.
func envOf(cmd *exec.Cmd) []string {
	if cmd.Env != nil {
		return cmd.Env
	}
	return os.Environ()
}

// Wait waits for the process, then stops what it left (its cgroup, its
// group) and removes its record and temporary directory. It may be called
// more than once.
func (p *Process) Wait() (Exit, error) {
	p.once.Do(func() {
		// Wait first without reaping: then what the process left behind
		// is killed while its pid still names it (a container's other
		// processes end with it), which also closes the output pipes
		// its children held, on which Cmd.Wait waits.
		pid := p.Cmd.Process.Pid
		awaitExit(pid)
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		if p.cg != nil {
			p.cg.kill()
		}
		p.err = p.Cmd.Wait()
		if errors.Is(p.err, exec.ErrWaitDelay) {
			p.err = nil // a descendant out of reach held a pipe: its output is cut
		}
		if p.cg != nil {
			if ws, ok := p.Cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
				p.exit.OOMKilled = p.cg.oomKills() > 0
			}
		}
		p.cleanup()
	})
	return p.exit, p.err
}

// Kill kills the process and everything it started.
func (p *Process) Kill() {
	_ = syscall.Kill(-p.Cmd.Process.Pid, syscall.SIGKILL)
	if p.cg != nil {
		p.cg.kill()
	}
}

func (p *Process) cleanup() {
	if p.cg != nil {
		_ = p.cg.remove()
	}
	if p.tmp != "" {
		_ = os.RemoveAll(p.tmp)
	}
	if p.root != "" {
		// Empty on the host: its mounts lived in the process's namespace.
		_ = os.Remove(p.root)
	}
	if p.record != "" {
		_ = os.Remove(p.record)
	}
}

// procRecord is what the run directory keeps of a running process.
type procRecord struct {
	Pid int `json:"pid"`
	// Start is its start time in clock ticks since boot (/proc/pid/stat):
	// with Boot it tells the process from a later one given its pid.
	Start   uint64   `json:"start"`
	Boot    string   `json:"boot"`
	Cgroups []string `json:"cgroups,omitempty"`
	TempDir string   `json:"tmpDir,omitempty"`
}

// reap stops what the records and cgroups of an earlier run show running
// and removes them; it counts the processes it killed.
func (s *Supervisor) reap() (int, error) {
	killed := 0
	files, _ := filepath.Glob(filepath.Join(s.dir, "procs", "*.json"))
	for _, f := range files {
		raw, err := os.ReadFile(f)
		var rec procRecord
		if err != nil || json.Unmarshal(raw, &rec) != nil {
			_ = os.Remove(f)
			continue
		}
		if rec.Boot == s.bootID {
			killed += killGroup(rec.Pid, rec.Start)
		}
		for _, d := range rec.Cgroups {
			killed += len(fieldsOf(filepath.Join(d, "cgroup.procs")))
			if err := removeCgroup(d); err != nil {
				return killed, fmt.Errorf("reap an earlier run's process: %w", err)
			}
		}
		if rec.TempDir != "" && strings.HasPrefix(rec.TempDir, filepath.Join(s.dir, "tmp")+"/") {
			_ = os.RemoveAll(rec.TempDir)
		}
		_ = os.Remove(f)
	}
	// Subtrees may hold processes whose record was never written (sless dev
	// died in between).
	var subtrees []string
	if raw, err := os.ReadFile(filepath.Join(s.dir, "cgroups.json")); err == nil {
		_ = json.Unmarshal(raw, &subtrees)
	}
	for _, d := range subtrees {
		if !strings.Contains(filepath.Base(d), "sless-dev-") {
			continue // never reap a cgroup this code did not name
		}
		for _, sub := range readSubdirs(d) {
			killed += len(fieldsOf(filepath.Join(sub, "cgroup.procs")))
		}
		if err := removeCgroup(d); err != nil {
			return killed, fmt.Errorf("reap an earlier run's cgroup: %w", err)
		}
	}
	_ = os.Remove(filepath.Join(s.dir, "cgroups.json"))
	_ = os.RemoveAll(filepath.Join(s.dir, "tmp"))
	return killed, nil
}

func readSubdirs(dir string) []string {
	ents, _ := os.ReadDir(dir)
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out
}

// killGroup kills the process group whose leader was pid, started at
// start. The leader itself counts only if it is the same process (not a
// later one given its pid); its group's other members count when they
// started no earlier than it, which a group that took over the number
// after the last of ours was gone cannot tell apart (all of ours, long
// gone, and theirs all new): that is left to the cgroup where there is one.
func killGroup(pid int, start uint64) int {
	st, ok := readStat(pid)
	if ok && st.start != start {
		return 0 // the pid is another process's now, and so is its group
	}
	n := 0
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := readStat(p); ok && st.pgrp == pid && st.start >= start && st.state != "Z" {
			if syscall.Kill(p, syscall.SIGKILL) == nil {
				n++
			}
		}
	}
	return n
}

type procStat struct {
	state string
	pgrp  int
	start uint64
}

// readStat reads a process's state, group and start time.
func readStat(pid int) (procStat, bool) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, false
	}
	// pid (comm) state ppid pgrp ...: comm may hold anything, so split
	// after its last ')'. Field n (1-based) is f[n-3].
	s := string(raw)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 20 {
		return procStat{}, false
	}
	pgrp, _ := strconv.Atoi(f[2])
	start, _ := strconv.ParseUint(f[19], 10, 64)
	return procStat{state: f[0], pgrp: pgrp, start: start}, true
}

func startTime(pid int) uint64 {
	st, _ := readStat(pid)
	return st.start
}

func bootID() string {
	raw, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return strings.TrimSpace(string(raw))
}

func writeFileAtomic(path string, raw []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, raw, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// running lists the pids of the processes the run directory records, in
// order; for tests and diagnostics.
func (s *Supervisor) running() []int {
	files, _ := filepath.Glob(filepath.Join(s.dir, "procs", "*.json"))
	var pids []int
	for _, f := range files {
		var rec procRecord
		if raw, err := os.ReadFile(f); err == nil && json.Unmarshal(raw, &rec) == nil {
			pids = append(pids, rec.Pid)
		}
	}
	sort.Ints(pids)
	return pids
}
