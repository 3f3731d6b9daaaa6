package localdev_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sless-dev/sless/pkg/local/proc"
)

// A handler that leaves two children behind: one in its process group,
// one in a session of its own (out of the group's reach, not the
// cgroup's).
const leaveChildren = `import os, subprocess
def handler(event, context):
    a = subprocess.Popen(["sleep", "1000"])
    b = subprocess.Popen(["sleep", "1000"], start_new_session=True)
    return {"wrapper": os.getpid(), "children": [a.pid, b.pid]}
`

// A handler that allocates 200 MiB.
const allocate200 = `def handler(event, context):
    b = bytearray(200 * 1024 * 1024)
    for i in range(0, len(b), 4096):
        b[i] = 1
    return {"allocated": len(b)}
`

func alive(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(stat)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && f[0] != "Z"
}

func awaitGone(t *testing.T, within time.Duration, what string, pids ...int) {
	t.Helper()
	deadline := time.Now().Add(within)
	for _, pid := range pids {
		for alive(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: process %d still runs after %s", what, pid, within)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// removeCgroupsOf reaps, when the test ends whatever its outcome, what a
// sless dev of data left (a test that failed before it stopped): the
// processes and cgroups its run directory records, as a next start would.
func removeCgroupsOf(t *testing.T, data string) {
	t.Cleanup(func() {
		var dirs []string
		raw, _ := os.ReadFile(filepath.Join(data, "run", "cgroups.json"))
		_ = json.Unmarshal(raw, &dirs)
		s, err := proc.NewSupervisor(filepath.Join(data, "run"), proc.SupervisorOptions{NoCgroups: true})
		if err != nil {
			t.Errorf("reap what sless dev left: %v", err)
			return
		}
		_ = s.Close()
		for _, d := range dirs {
			if _, err := os.Stat(d); err == nil {
				t.Errorf("cgroup %s left behind", d)
			}
		}
	})
}

// After kill -9 of sless dev no function process survives it for long:
// the wrapper dies with it, and what the wrapper left (children in its
// group, and with cgroups one that left the group) is stopped by the
// next sless dev of the same data directory, which then runs one process
// for the revision.
func TestKilledDevLeavesNoFunctionProcess(t *testing.T) {
	for _, c := range []struct {
		name  string
		flags []string
	}{{"cgroups", nil}, {"no-cgroups", []string{"--cgroups=false"}}} {
		t.Run(c.name, func(t *testing.T) {
			data := t.TempDir()
			removeCgroupsOf(t, data)
			d := startDevIn(t, data, 10*time.Minute, c.flags...)
			withCgroups := !strings.Contains(d.devLog(), "a function's children may outlive it")
			if c.flags != nil && !strings.Contains(d.devLog(), "sless dev: warning: memory limits are enforced by RLIMIT_DATA") {
				t.Fatalf("--cgroups=false: no warning of what is not enforced; sless dev said:\n%s", d.devLog())
			}
			d.createPython("leaver", leaveChildren, "")
			d.awaitReady("e2e", "leaver", 2*time.Minute)
			code, b := d.do("GET", "/fn/e2e/leaver", "", nil)
			var got struct {
				Wrapper  int   `json:"wrapper"`
				Children []int `json:"children"`
			}
			if code != 200 || json.Unmarshal(b, &got) != nil || len(got.Children) != 2 {
				t.Fatalf("call: %d %s", code, b)
			}
			t.Cleanup(func() {
				for _, p := range got.Children {
					_ = syscall.Kill(p, syscall.SIGKILL)
				}
			})
			orphans := got.Children
			if !withCgroups {
				orphans = got.Children[:1] // the one out of the group escapes: nothing holds it
			}

			if err := d.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			<-d.exited
			awaitGone(t, 10*time.Second, "the wrapper after kill -9 of sless dev", got.Wrapper)
			for _, p := range orphans {
				if !alive(p) {
					t.Fatalf("child %d died with sless dev; the restart has nothing to reap", p)
				}
			}

			d2 := startDevIn(t, data, 10*time.Minute, c.flags...)
			awaitGone(t, 10*time.Second, "an orphan of the killed sless dev after the restart", orphans...)
			if !strings.Contains(d2.devLog(), "process(es) an earlier sless dev of") {
				t.Errorf("the restart did not say it stopped the orphans; it said:\n%s", d2.devLog())
			}
			deadline := time.Now().Add(time.Minute)
			for {
				code, b = d2.do("GET", "/fn/e2e/leaver", "", nil)
				if code == 200 {
					break
				}
				if code != 503 || time.Now().After(deadline) {
					t.Fatalf("call after the restart: %d %s", code, b)
				}
				time.Sleep(100 * time.Millisecond)
			}
			// Without cgroups a child out of the wrapper's group outlives
			// even a clean stop: the test ends it.
			var again struct {
				Children []int `json:"children"`
			}
			_ = json.Unmarshal(b, &again)
			t.Cleanup(func() {
				for _, p := range again.Children {
					_ = syscall.Kill(p, syscall.SIGKILL)
				}
			})
			if kids := d2.children(); len(kids) != 1 {
				t.Fatalf("after the restart sless dev runs %d processes (%v), want one for the revision", len(kids), kids)
			}
		})
	}
}

// A function over its memoryMB is killed by the kernel and says so as a
// cluster would: the call's record and answer, the function's log, and,
// once it happens twice in a row, its condition (reason OOMKilled).
func TestOverMemoryLimitIsOOMKilled(t *testing.T) {
	data := t.TempDir()
	removeCgroupsOf(t, data)
	d := startDevIn(t, data, 10*time.Minute)
	if strings.Contains(d.devLog(), "RLIMIT_DATA") {
		t.Skipf("no memory cgroup here; sless dev said:\n%s", d.devLog())
	}
	d.createPython("hog", allocate200, `{"memoryMB": 64}`)
	d.awaitReady("e2e", "hog", 2*time.Minute)
	for i := 0; i < 2; i++ {
		code, b := d.do("GET", "/fn/e2e/hog", "", nil)
		if code != 502 || !strings.Contains(string(b), "OOMKilled") {
			t.Fatalf("call %d of a function allocating 200 MiB under memoryMB 64: %d %s", i+1, code, b)
		}
	}
	code, b := d.do("GET", "/v1/namespaces/e2e/functions/hog/invocations", "", nil)
	var page struct {
		Items []struct {
			Status int    `json:"status"`
			Error  string `json:"error"`
		} `json:"items"`
	}
	if code != 200 || json.Unmarshal(b, &page) != nil || len(page.Items) == 0 {
		t.Fatalf("invocations: %d %s", code, b)
	}
	for _, it := range page.Items {
		if it.Status != 502 || !strings.Contains(it.Error, "OOMKilled") {
			t.Errorf("record %+v, want 502 with OOMKilled in its error", it)
		}
	}
	if _, b := d.do("GET", "/v1/namespaces/e2e/functions/hog/logs", "", nil); !strings.Contains(string(b), "OOMKilled") {
		t.Errorf("the function's log does not say OOMKilled:\n%s", b)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		_, b := d.do("GET", "/v1/namespaces/e2e/functions/hog", "", nil)
		var fn fnStatus
		_ = json.Unmarshal(b, &fn)
		for _, c := range fn.Status.Conditions {
			if c.Type == "Ready" && c.Status == "False" && c.Reason == "OOMKilled" && strings.Contains(c.Message, "memory 64Mi") {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no Ready=False OOMKilled condition after two OOM kills: %s", b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
