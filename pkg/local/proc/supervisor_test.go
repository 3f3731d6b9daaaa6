package proc

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A test binary run with this variable set is a stand-in sless dev: it
// makes a Supervisor on the directory named, starts a shell that leaves a
// child of its own, prints both pids and waits to be killed.
const serverEnv = "SLESS_PROC_TEST_SERVER"

func TestMain(m *testing.M) {
	if dir := os.Getenv(serverEnv); dir != "" {
		s, err := NewSupervisor(dir, SupervisorOptions{NoCgroups: os.Getenv(serverEnv+"_NOCG") != ""})
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		cmd := exec.Command("sh", "-c", `sleep 1000 & echo "$$ $!"; wait`)
		out, _ := cmd.StdoutPipe()
		if _, err := s.Start(cmd, Spec{Name: "fn.default.orphan", TempDir: true}); err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		line, _ := bufio.NewReader(out).ReadString('\n')
		fmt.Print(line)
		select {}
	}
	os.Exit(m.Run())
}

// newSupervisor makes a Supervisor on a fresh directory whose cgroups are
// removed when the test ends, whatever its outcome.
func newSupervisor(t *testing.T, opts SupervisorOptions) *Supervisor {
	t.Helper()
	s, err := NewSupervisor(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		for _, d := range s.cg.subtrees() {
			if _, err := os.Stat(d); err == nil {
				t.Errorf("cgroup %s left behind", d)
			}
		}
	})
	return s
}

// needCgroup skips where this machine gives no cgroup with ctl.
func needCgroup(t *testing.T, s *Supervisor, ctl string) {
	if !s.cg.has(ctl) {
		t.Skipf("no %s cgroup here: %s", ctl, s.Warning())
	}
}

func alive(pid int) bool {
	st, ok := readStat(pid)
	return ok && st.state != "Z"
}

// awaitGone waits until none of pids runs.
func awaitGone(t *testing.T, within time.Duration, pids ...int) {
	t.Helper()
	deadline := time.Now().Add(within)
	for _, pid := range pids {
		for alive(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("process %d still runs after %s", pid, within)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

const allocate = `import time
b = bytearray(200 * 1024 * 1024)
for i in range(0, len(b), 4096):
    b[i] = 1
print("allocated")
`

func TestMemoryLimitKillsAndSaysOOMKilled(t *testing.T) {
	s := newSupervisor(t, SupervisorOptions{})
	needCgroup(t, s, ctlMemory)
	var out strings.Builder
	cmd := exec.Command("python3", "-c", allocate)
	cmd.Stdout, cmd.Stderr = &out, &out
	exit, err := s.Run(context.Background(), cmd, Spec{Name: "oom", Limits: Limits{MemoryBytes: 64 << 20}})
	if err == nil || !exit.OOMKilled {
		t.Fatalf("a process allocating 200 MiB under a 64 MiB limit: err %v, OOMKilled %v, output %q", err, exit.OOMKilled, out.String())
	}
	if ws := cmd.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Errorf("status %v, want killed by SIGKILL", cmd.ProcessState)
	}

	// Under the limit the same code runs, and nothing says OOMKilled.
	cmd = exec.Command("python3", "-c", allocate)
	exit, err = s.Run(context.Background(), cmd, Spec{Name: "fits", Limits: Limits{MemoryBytes: 512 << 20}})
	if err != nil || exit.OOMKilled {
		t.Fatalf("under the limit: err %v, OOMKilled %v", err, exit.OOMKilled)
	}
}

func TestNoCgroupsWarnsAndLimitsByRlimit(t *testing.T) {
	s := newSupervisor(t, SupervisorOptions{NoCgroups: true})
	w := s.Warning()
	for _, want := range []string{"RLIMIT_DATA", "cpu is not enforced", "process count is not limited", "cgroups are turned off"} {
		if !strings.Contains(w, want) {
			t.Errorf("warning %q does not say %q", w, want)
		}
	}
	var out strings.Builder
	cmd := exec.Command("python3", "-c", allocate)
	cmd.Stdout, cmd.Stderr = &out, &out
	exit, err := s.Run(context.Background(), cmd, Spec{Name: "rlimit", Limits: Limits{MemoryBytes: 64 << 20}})
	if err == nil || exit.OOMKilled || !strings.Contains(out.String(), "MemoryError") {
		t.Fatalf("allocating 200 MiB under RLIMIT_DATA 64 MiB: err %v, OOMKilled %v, output %q", err, exit.OOMKilled, out.String())
	}
}

func TestCPULimitThrottles(t *testing.T) {
	s := newSupervisor(t, SupervisorOptions{})
	needCgroup(t, s, ctlCPU)
	cmd := exec.Command("sh", "-c", "while :; do :; done")
	p, err := s.Start(cmd, Spec{Name: "busy", Limits: Limits{CPULimitMilli: 200}})
	if err != nil {
		t.Fatal(err)
	}
	// A busy loop's CPU time over a window of wall time is the measure;
	// there is no condition to await.
	const window = 3 * time.Second
	time.Sleep(window)
	p.Kill()
	_, _ = p.Wait()
	used := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	if limit := time.Duration(float64(window) * 0.2 * 1.2); used > limit {
		t.Fatalf("a busy loop limited to 200m used %s of CPU in %s, more than %s", used, window, limit)
	}
	t.Logf("busy loop limited to 200m: %s of CPU in %s", used, window)
}

func TestPidsLimit(t *testing.T) {
	s := newSupervisor(t, SupervisorOptions{})
	needCgroup(t, s, ctlPids)
	var out strings.Builder
	cmd := exec.Command("sh", "-c", "for i in 1 2 3 4 5 6 7 8; do sleep 5 & done; wait")
	cmd.Stdout, cmd.Stderr = &out, &out
	_, err := s.Run(context.Background(), cmd, Spec{Name: "forks", Limits: Limits{Pids: 4}})
	if err == nil && !strings.Contains(out.String(), "fork") {
		t.Fatalf("8 children under pids.max 4 ran: %q", out.String())
	}
}

func TestTempDirIsPrivateAndRemoved(t *testing.T) {
	s := newSupervisor(t, SupervisorOptions{})
	cmd := exec.Command("sh", "-c", `echo "$TMPDIR"; touch "$TMPDIR/x"`)
	var out strings.Builder
	cmd.Stdout = &out
	if _, err := s.Run(context.Background(), cmd, Spec{Name: "tmp", TempDir: true}); err != nil {
		t.Fatal(err)
	}
	dir := strings.TrimSpace(out.String())
	if !strings.HasPrefix(dir, s.dir) {
		t.Fatalf("TMPDIR %q is not under the run directory %s", dir, s.dir)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("TMPDIR %s outlived its process: %v", dir, err)
	}
}

// startServer runs a stand-in sless dev on dir and returns it with the
// pids of its child (a shell) and grandchild (a sleep).
func startServer(t *testing.T, dir string, noCgroups bool) (*exec.Cmd, int, int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), serverEnv+"="+dir)
	if noCgroups {
		cmd.Env = append(cmd.Env, serverEnv+"_NOCG=1")
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	var child, grandchild int
	if _, serr := fmt.Sscanf(line, "%d %d", &child, &grandchild); err != nil || serr != nil {
		t.Fatalf("stand-in server said %q (%v)", line, err)
	}
	t.Cleanup(func() { _ = syscall.Kill(child, syscall.SIGKILL); _ = syscall.Kill(grandchild, syscall.SIGKILL) })
	return cmd, child, grandchild
}

func TestKilledServerTakesChildrenAndRestartReaps(t *testing.T) {
	for _, noCgroups := range []bool{false, true} {
		t.Run(fmt.Sprintf("noCgroups=%v", noCgroups), func(t *testing.T) {
			dir := t.TempDir()
			server, child, grandchild := startServer(t, dir, noCgroups)
			if err := server.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = server.Wait()
			// The parent-death signal takes the direct child at once.
			awaitGone(t, 10*time.Second, child)
			// A grandchild it left is reaped by the next start.
			if !alive(grandchild) {
				t.Fatalf("the grandchild %d died with its parent; the test shows nothing", grandchild)
			}
			s, err := NewSupervisor(dir, SupervisorOptions{NoCgroups: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			awaitGone(t, 10*time.Second, grandchild)
			if s.Reaped() < 1 {
				t.Errorf("Reaped() = %d, want at least the grandchild", s.Reaped())
			}
			if left := s.running(); len(left) != 0 {
				t.Errorf("records left after reaping: %v", left)
			}
			if ents, _ := os.ReadDir(filepath.Join(dir, "tmp")); len(ents) != 0 {
				t.Errorf("temporary directories left after reaping: %v", ents)
			}
		})
	}
}

func TestReapSparesAProcessThatTookTheRecordedPid(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "procs"), 0o700); err != nil {
		t.Fatal(err)
	}
	// A process of its own group that is not the one recorded: its start
	// time differs, as a later process given a dead one's pid.
	other := exec.Command("sleep", "1000")
	other.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Process.Kill(); _ = other.Wait() })
	pid := other.Process.Pid
	raw, _ := json.Marshal(procRecord{Pid: pid, Start: startTime(pid) - 1, Boot: bootID()})
	if err := os.WriteFile(filepath.Join(dir, "procs", "1-x.json"), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := NewSupervisor(dir, SupervisorOptions{NoCgroups: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !alive(pid) || s.Reaped() != 0 {
		t.Fatalf("process %d with another start time: alive %v, reaped %d", pid, alive(pid), s.Reaped())
	}
	// The same record with its true start time is reaped.
	raw, _ = json.Marshal(procRecord{Pid: pid, Start: startTime(pid), Boot: bootID()})
	if err := os.WriteFile(filepath.Join(dir, "procs", "2-x.json"), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	s2, err := NewSupervisor(dir, SupervisorOptions{NoCgroups: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	_ = other.Wait()
	if s2.Reaped() != 1 {
		t.Fatalf("reaped %d, want 1", s2.Reaped())
	}
}

func TestStartStopLeavesNoCgroup(t *testing.T) {
	s := newSupervisor(t, SupervisorOptions{})
	if s.cg.v2 == "" && len(s.cg.v1) == 0 {
		t.Skip("no cgroups here: " + s.Warning())
	}
	cmd := exec.Command("sh", "-c", "sleep 1000 & sleep 1000 & wait")
	p, err := s.Start(cmd, Spec{Name: "two", Limits: Limits{MemoryBytes: 64 << 20, Pids: 16}})
	if err != nil {
		t.Fatal(err)
	}
	dirs := p.cg.dirs()
	if len(dirs) == 0 {
		t.Fatal("no cgroup made")
	}
	var procs []string
	for deadline := time.Now().Add(10 * time.Second); len(procs) < 3; time.Sleep(5 * time.Millisecond) {
		if procs = fieldsOf(filepath.Join(dirs[0], "cgroup.procs")); time.Now().After(deadline) {
			t.Fatalf("cgroup %s holds %v, want the shell and its two children", dirs[0], procs)
		}
	}
	_ = syscall.Kill(cmd.Process.Pid, syscall.SIGKILL) // the children are left to the cgroup
	_, _ = p.Wait()
	for _, pstr := range procs {
		n, _ := strconv.Atoi(pstr)
		awaitGone(t, 10*time.Second, n)
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("cgroup %s outlived its process", d)
		}
	}
}
