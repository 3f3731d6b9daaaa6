package serving

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	"github.com/sless-dev/sless/pkg/adapter"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/local/blobs"
	"github.com/sless-dev/sless/pkg/local/build"
	"github.com/sless-dev/sless/pkg/local/localtest"
	"github.com/sless-dev/sless/pkg/logs"
	"github.com/sless-dev/sless/runtimes"
)

type serverBed struct {
	t       *testing.T
	blobs   *blobs.Store
	builder *build.Builder
	server  *Server
	opts    ServerOptions
	changes chan string
}

func newServerBed(t *testing.T, idle time.Duration) *serverBed {
	return newServerBedWith(t, idle, nil)
}

// newServerBedWith lets tune change the server's options before it starts.
func newServerBedWith(t *testing.T, idle time.Duration, tune func(*ServerOptions)) *serverBed {
	dir := t.TempDir()
	blobs, _ := blobs.New(filepath.Join(dir, "blobs"))
	b, err := build.New(filepath.Join(dir, "builds"), runtimes.LocalOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	bed := &serverBed{t: t, blobs: blobs, builder: b, changes: make(chan string, 100)}
	opts := ServerOptions{
		Dir: b.Dir, IdleTimeout: idle, DrainGrace: 50 * time.Millisecond,
		LogDir: filepath.Join(dir, "logs"),
		OnChange: func(ns, name string) {
			select {
			case bed.changes <- ns + "/" + name:
			default: // nobody waits; a later state read sees the change
			}
		},
	}
	if tune != nil {
		tune(&opts)
	}
	bed.opts = opts
	bed.server = NewServer(opts)
	t.Cleanup(func() { bed.server.Close(); b.Close() })
	return bed
}

// restart closes the server and starts another with the same options, as
// a restarted sless dev does.
func (bed *serverBed) restart() {
	bed.server.Close()
	bed.server = NewServer(bed.opts)
}

// image builds a Python function answering with reply and returns its image.
func (bed *serverBed) image(fn *slessv1alpha1.Function, code string) string {
	in := localtest.StoreContext(bed.t, bed.blobs, "python3.12", "main.handler", map[string]string{"main.py": code})
	st := localtest.AwaitBuild(bed.t, bed.builder, fn, in, time.Minute)
	if !st.Succeeded {
		bed.t.Fatalf("build: %+v", st)
	}
	return st.Image
}

func replyCode(reply string) string {
	return fmt.Sprintf("import os\ndef handler(event, context):\n    return {'reply': %q, 'env': os.environ.get('GREETING', ''), 'revision': context.revision}\n", reply)
}

// awaitReady calls EnsureService until it reports Ready (or a failure).
func (bed *serverBed) awaitState(fn *slessv1alpha1.Function, image string, want func(adapter.ServeState) bool) adapter.ServeState {
	bed.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := bed.server.EnsureService(context.Background(), fn, image)
		if err != nil {
			bed.t.Fatal(err)
		}
		if want(st) {
			return st
		}
		if time.Now().After(deadline) {
			bed.t.Fatalf("state not reached: %+v", st)
		}
		select {
		case <-bed.changes:
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func ready(st adapter.ServeState) bool { return st.Ready }

// call activates the function and calls it once.
func (bed *serverBed) call(ns, name string) (string, bool, error) {
	call, err := bed.server.Activate(context.Background(), ns, name)
	if err != nil {
		return "", false, err
	}
	defer call.Done()
	cold := call.Cold
	resp, err := http.Post(call.URL.String()+"/", "application/json", strings.NewReader(`{}`))
	if err != nil {
		return "", cold, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return string(b), cold, fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	return string(b), cold, nil
}

func awaitNoProcesses(t *testing.T, s *Server, ns, name string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for len(s.Processes(ns, name)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("processes still running after %s: %v", within, s.Processes(ns, name))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func awaitExit(t *testing.T, pid int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for syscall.Kill(pid, 0) == nil {
		// A zombie still answers kill 0 until reaped; the server reaps.
		if time.Now().After(deadline) {
			t.Fatalf("process %d still alive after %s", pid, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestServerScaleToZeroAndColdStart(t *testing.T) {
	bed := newServerBed(t, 400*time.Millisecond)
	fn := localtest.FunctionNamed("ns", "hello")
	fn.Generation = 1
	fn.Spec.Env = []slessv1alpha1.EnvVar{{Name: "GREETING", Value: "hi"}}
	img := bed.image(fn, replyCode("one"))

	first, _ := bed.server.EnsureService(context.Background(), fn, img)
	if first.Ready || first.Reason != ReasonDeploying || first.LatestCreatedRevision != "hello-00001" ||
		!first.Created || first.Updated || first.Revision != "hello-00001" {
		t.Fatalf("first EnsureService = %+v, want a revision starting", first)
	}
	st := bed.awaitState(fn, img, ready)
	if st.LatestReadyRevision != "hello-00001" || st.Address == "" {
		t.Fatalf("ready state = %+v", st)
	}
	body, _, err := bed.call("ns", "hello")
	if err != nil || !strings.Contains(body, `"reply": "one"`) || !strings.Contains(body, `"env": "hi"`) || !strings.Contains(body, "hello-00001") {
		t.Fatalf("call = %s, %v", body, err)
	}
	pids := bed.server.Processes("ns", "hello")
	if len(pids) != 1 {
		t.Fatalf("processes = %v, want one", pids)
	}
	// Idle past the timeout: the process is gone.
	awaitNoProcesses(t, bed.server, "ns", "hello", 5*time.Second)
	awaitExit(t, pids[0], 5*time.Second)
	if _, running, ok := bed.server.Serving("ns", "hello"); !ok || running {
		t.Fatalf("Serving after idle: running=%v ok=%v", running, ok)
	}
	// Concurrent first calls share one start.
	var wg sync.WaitGroup
	var colds atomic.Int32
	errs := make(chan error, 10)
	for i := 0; i < 10; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body, cold, err := bed.call("ns", "hello")
			if cold {
				colds.Add(1)
			}
			if err != nil || !strings.Contains(body, `"reply": "one"`) {
				errs <- fmt.Errorf("cold call: %s %v", body, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if colds.Load() == 0 {
		t.Error("no call was reported cold after scale to zero")
	}
	if p := bed.server.Processes("ns", "hello"); len(p) != 1 || p[0] == pids[0] {
		t.Fatalf("after the cold start: processes %v (before: %v), want one new", p, pids)
	}
	// EnsureService with the same spec starts nothing new.
	if st, _ := bed.server.EnsureService(context.Background(), fn, img); !st.Ready || st.LatestCreatedRevision != "hello-00001" || st.Created || st.Updated {
		t.Fatalf("same spec again: %+v", st)
	}
	bed.server.Remove("ns", "hello")
	if len(bed.server.Processes("ns", "hello")) != 0 {
		t.Fatal("processes after Remove")
	}
	if _, err := bed.server.Activate(context.Background(), "ns", "hello"); !errors.Is(err, ErrNoRevision) {
		t.Fatalf("Activate after Remove: %v", err)
	}
}

// containerConcurrency bounds the calls an instance takes at once: a call
// past it waits for one to end, or fails with invoke.ErrBusy when its
// context ends first. An instance with a call in progress is not stopped
// as idle, however long the call lasts; it is once the call is done.
func TestServerHoldsCallsPastContainerConcurrency(t *testing.T) {
	bed := newServerBed(t, 100*time.Millisecond)
	fn := localtest.FunctionNamed("ns", "single")
	fn.Generation = 1
	fn.Spec.Scale = &slessv1alpha1.ScaleSpec{ContainerConcurrency: ptr.To[int64](1)}
	img := bed.image(fn, replyCode("one"))
	bed.awaitState(fn, img, ready)

	first, err := bed.server.Activate(context.Background(), "ns", "single")
	if err != nil {
		t.Fatal(err)
	}
	pids := bed.server.Processes("ns", "single")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	_, err = bed.server.Activate(ctx, "ns", "single")
	cancel()
	if !errors.Is(err, invoke.ErrBusy) || !strings.Contains(err.Error(), "takes 1 calls at once") {
		t.Fatalf("second call while the first holds the only slot: %v, want ErrBusy", err)
	}
	// The instance outlived three idle timeouts with a call in progress.
	if got := bed.server.Processes("ns", "single"); len(got) != 1 || got[0] != pids[0] {
		t.Fatalf("processes %v while a call is in progress, want %v", got, pids)
	}

	waiting := make(chan *Call, 1)
	go func() {
		c, err := bed.server.Activate(context.Background(), "ns", "single")
		if err != nil {
			t.Error(err)
		}
		waiting <- c
	}()
	select {
	case <-waiting:
		t.Fatal("a second call got the slot the first holds")
	case <-time.After(200 * time.Millisecond):
	}
	first.Done()
	first.Done() // a second Done frees nothing more
	var second *Call
	select {
	case second = <-waiting:
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting call did not get the slot the first freed")
	}
	if second.URL.String() != first.URL.String() || second.Cold {
		t.Errorf("second call %+v, want the same warm instance as %s", second, first.URL)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 300*time.Millisecond)
	_, err = bed.server.Activate(ctx, "ns", "single")
	cancel()
	if !errors.Is(err, invoke.ErrBusy) {
		t.Fatalf("a third call while the second holds the slot: %v (the double Done freed a slot)", err)
	}
	second.Done()
	awaitNoProcesses(t, bed.server, "ns", "single", 10*time.Second)
}

func TestServerRolloutWithoutFailedCalls(t *testing.T) {
	bed := newServerBed(t, time.Minute)
	fn := localtest.FunctionNamed("ns", "roll")
	fn.Generation = 1
	img1 := bed.image(fn, replyCode("old"))
	bed.awaitState(fn, img1, ready)
	oldPids := bed.server.Processes("ns", "roll")

	// A load loop runs across the switch; every call must succeed.
	stop := make(chan struct{})
	var calls, failures atomic.Int64
	var sawNew atomic.Bool
	var wg sync.WaitGroup
	var firstErr atomic.Value
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				body, _, err := bed.call("ns", "roll")
				calls.Add(1)
				if err != nil {
					failures.Add(1)
					firstErr.CompareAndSwap(nil, err)
				} else if strings.Contains(body, `"reply": "new"`) {
					sawNew.Store(true)
				}
			}
		}()
	}
	time.Sleep(100 * time.Millisecond) // let the loop run on the old revision
	fn.Generation = 2
	img2 := bed.image(fn, replyCode("new"))
	if up, _ := bed.server.EnsureService(context.Background(), fn, img2); !up.Updated || up.Created || up.Revision != "roll-00002" {
		t.Errorf("EnsureService of a new image = %+v, want an update to roll-00002", up)
	}
	st := bed.awaitState(fn, img2, ready)
	if st.LatestReadyRevision != "roll-00002" {
		t.Fatalf("after rollout: %+v", st)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !sawNew.Load() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // past the old revision's drain
	close(stop)
	wg.Wait()
	if failures.Load() != 0 {
		t.Fatalf("%d of %d calls failed across the switch; first: %v", failures.Load(), calls.Load(), firstErr.Load())
	}
	if !sawNew.Load() {
		t.Fatal("the new code never answered")
	}
	awaitExit(t, oldPids[0], 5*time.Second)
	body, _, err := bed.call("ns", "roll")
	if err != nil || !strings.Contains(body, `"reply": "new"`) {
		t.Fatalf("after the switch: %s %v", body, err)
	}
	t.Logf("%d calls across the switch, none failed", calls.Load())

	// A revision that cannot start fails with the wrapper's own message and
	// the previous one keeps serving.
	fn.Generation = 3
	broken := bed.image(fn, "import no_such_module_here\ndef handler(e, c):\n    return 1\n")
	st = bed.awaitState(fn, broken, func(st adapter.ServeState) bool { return st.Reason == ReasonRevisionFailed })
	if st.Ready || !st.Failed || !strings.Contains(st.Message, "no_such_module_here") || st.LatestReadyRevision != "roll-00002" || st.LatestCreatedRevision != "roll-00003" {
		t.Fatalf("broken revision: %+v", st)
	}
	if body, _, err := bed.call("ns", "roll"); err != nil || !strings.Contains(body, `"reply": "new"`) {
		t.Fatalf("while the new revision is broken: %s %v", body, err)
	}
	// Fixing it recovers.
	fn.Generation = 4
	fixed := bed.image(fn, replyCode("fixed"))
	if st := bed.awaitState(fn, fixed, ready); st.LatestReadyRevision != "roll-00004" {
		t.Fatalf("fixed: %+v", st)
	}
}

func TestServerMinScaleAndRefusals(t *testing.T) {
	bed := newServerBed(t, 200*time.Millisecond)
	fn := localtest.FunctionNamed("ns", "warm")
	fn.Generation = 1
	fn.Spec.Scale = &slessv1alpha1.ScaleSpec{Min: ptr.To[int32](1)}
	img := bed.image(fn, replyCode("warm"))
	bed.awaitState(fn, img, ready)
	time.Sleep(600 * time.Millisecond) // three idle periods
	if p := bed.server.Processes("ns", "warm"); len(p) != 1 {
		t.Fatalf("min scale 1: processes %v after idling", p)
	}
	// Lowering min scale lets it go to zero, without a new revision.
	fn.Spec.Scale.Min = ptr.To[int32](0)
	if st, _ := bed.server.EnsureService(context.Background(), fn, img); st.LatestCreatedRevision != "warm-00001" || !st.Ready {
		t.Fatalf("min scale change: %+v", st)
	}
	awaitNoProcesses(t, bed.server, "ns", "warm", 5*time.Second)

	cases := []struct {
		name   string
		mutate func(*slessv1alpha1.Function)
		image  string
		reason string
	}{
		{"prebuilt image", func(*slessv1alpha1.Function) {}, "docker.io/library/nginx@sha256:" + strings.Repeat("a", 64), ReasonImageNotSupported},
		{"secret env", func(f *slessv1alpha1.Function) {
			f.Spec.Env = []slessv1alpha1.EnvVar{{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{Key: "k"}}}}
		}, img, ReasonEnvUnresolved},
		{"a GPU", func(f *slessv1alpha1.Function) {
			f.Spec.Resources = &slessv1alpha1.ResourceSpec{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}}
		}, img, ReasonResourceNotSupported},
		{"a claim", func(f *slessv1alpha1.Function) {
			f.Spec.Volumes = []slessv1alpha1.Volume{{Name: "data", MountPath: "/data", PersistentVolumeClaim: &slessv1alpha1.PVCVolume{ClaimName: "data"}}}
		}, img, ReasonVolumeNotSupported},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := localtest.FunctionNamed("ns", "refused-"+strings.ReplaceAll(c.name, " ", "-"))
			c.mutate(f)
			st, err := bed.server.EnsureService(context.Background(), f, c.image)
			if err != nil || st.Ready || !st.Failed || st.Reason != c.reason || st.Message == "" ||
				(c.reason == ReasonResourceNotSupported && !strings.Contains(st.Message, "nvidia.com/gpu")) {
				t.Fatalf("state = %+v, %v; want reason %s", st, err, c.reason)
			}
		})
	}
}

// A revision whose start failed is started again after its backoff, and
// becomes ready when the cause went away.
func TestServerRetriesAFailedStart(t *testing.T) {
	bed := newServerBed(t, time.Minute)
	bed.server.opts.RetryBackoff = 200 * time.Millisecond
	fn := localtest.FunctionNamed("ns", "flaky")
	fn.Generation = 1
	// The first start fails; it leaves a marker so the next one loads.
	code := "import os\nmarker = os.path.join(os.environ['SLESS_FUNCTION_DIR'], '.started-once')\n" +
		"if not os.path.exists(marker):\n    open(marker, 'w').close()\n    raise RuntimeError('first start fails')\n" +
		"def handler(event, context):\n    return 'second start'\n"
	img := bed.image(fn, code)
	st := bed.awaitState(fn, img, func(st adapter.ServeState) bool { return st.Failed })
	if !strings.Contains(st.Message, "first start fails") {
		t.Fatalf("failed state: %+v", st)
	}
	st = bed.awaitState(fn, img, ready)
	if st.LatestReadyRevision != "flaky-00001" {
		t.Fatalf("after the retry: %+v", st)
	}
	if body, _, err := bed.call("ns", "flaky"); err != nil || !strings.Contains(body, "second start") {
		t.Fatalf("call after the retry: %s %v", body, err)
	}
}

// The revision serving a function is kept in StateDir: a restarted server
// serves it again, whether the function's latest revision fails to start
// (the reconciler then asks for that one) or its latest build failed (the
// reconciler asks for none), and reports it as the latest ready revision.
func TestServerRestartKeepsTheLastReadyRevision(t *testing.T) {
	state := filepath.Join(t.TempDir(), "serving")
	bed := newServerBedWith(t, time.Minute, func(o *ServerOptions) { o.StateDir = state })
	startFails := localtest.FunctionNamed("ns", "start-fails")
	startFails.Generation = 1
	good := bed.image(startFails, replyCode("good"))
	bed.awaitState(startFails, good, ready)
	startFails.Generation = 2
	broken := bed.image(startFails, "raise RuntimeError('broken at import')\n")
	bed.awaitState(startFails, broken, func(st adapter.ServeState) bool { return st.Failed })

	buildFails := localtest.FunctionNamed("ns", "build-fails")
	buildFails.Generation = 1
	built := bed.image(buildFails, replyCode("built"))
	bed.awaitState(buildFails, built, ready)
	// Its next build fails: the reconciler never calls EnsureService again.

	gone := localtest.FunctionNamed("ns", "gone")
	gone.Generation = 1
	bed.awaitState(gone, good, ready)
	bed.server.Remove("ns", "gone")

	bed.restart()
	for name, reply := range map[string]string{"start-fails": "good", "build-fails": "built"} {
		rev, running, ok := bed.server.Serving("ns", name)
		if !ok || running || rev != name+"-00001" {
			t.Fatalf("%s after restart: serving %q running=%v ok=%v, want %s-00001 stopped", name, rev, running, ok, name)
		}
		body, cold, err := bed.call("ns", name)
		if err != nil || !cold || !strings.Contains(body, reply) || !strings.Contains(body, name+"-00001") {
			t.Fatalf("%s after restart: %s cold=%v %v", name, body, cold, err)
		}
	}
	if _, _, ok := bed.server.Serving("ns", "gone"); ok {
		t.Fatal("a removed function is served again after a restart")
	}
	// The reconciler asks again for the failing revision: it fails again,
	// and the restored one is still the latest ready and still serves.
	st := bed.awaitState(startFails, broken, func(st adapter.ServeState) bool { return st.Failed })
	if st.LatestReadyRevision != "start-fails-00001" || st.LatestCreatedRevision != "start-fails-00002" ||
		!strings.Contains(st.Message, "broken at import") {
		t.Fatalf("failing revision after restart: %+v", st)
	}
	if body, _, err := bed.call("ns", "start-fails"); err != nil || !strings.Contains(body, "good") {
		t.Fatalf("after the failing revision failed again: %s %v", body, err)
	}
	// Asked for the revision it restored (a function whose build is fine
	// after the restart), the server reports it ready, no new revision.
	if st, err := bed.server.EnsureService(context.Background(), buildFails, built); err != nil || !st.Ready ||
		st.Created || st.Updated || st.LatestReadyRevision != "build-fails-00001" || st.LatestCreatedRevision != "build-fails-00001" {
		t.Fatalf("the restored revision asked for again: %+v %v", st, err)
	}
}

// Close stops every process, also one the reaper idled out that is still
// in its drain grace and one a call started right after, and no process
// starts once Close began.
func TestServerCloseStopsEveryProcess(t *testing.T) {
	bed := newServerBedWith(t, 200*time.Millisecond, func(o *ServerOptions) { o.DrainGrace = time.Minute })
	fn := localtest.FunctionNamed("ns", "idler")
	fn.Generation = 1
	img := bed.image(fn, replyCode("idle"))
	bed.awaitState(fn, img, ready)
	idled := bed.server.Processes("ns", "idler")
	if len(idled) != 1 {
		t.Fatalf("processes %v, want one", idled)
	}
	// The reaper takes it out of service; it drains for a minute.
	awaitNoProcesses(t, bed.server, "ns", "idler", 10*time.Second)
	if syscall.Kill(idled[0], 0) != nil {
		t.Fatal("the idled instance exited before its drain grace")
	}
	if _, cold, err := bed.call("ns", "idler"); err != nil || !cold {
		t.Fatalf("call after the idle stop: cold=%v %v", cold, err)
	}
	started := bed.server.Processes("ns", "idler")
	begun := time.Now()
	bed.server.Close()
	if d := time.Since(begun); d > 30*time.Second {
		t.Errorf("Close took %s: it waited out a drain grace", d)
	}
	for _, pid := range append(idled, started...) {
		if syscall.Kill(pid, 0) == nil {
			t.Errorf("process %d outlived Close", pid)
		}
	}
	other := localtest.FunctionNamed("ns", "late")
	other.Generation = 1
	if _, err := bed.server.EnsureService(context.Background(), other, img); err == nil {
		t.Error("EnsureService after Close accepted a revision to start")
	}
	if p := bed.server.Processes("ns", "late"); len(p) != 0 {
		t.Errorf("processes %v started after Close", p)
	}
}

// One generation can get several specs — each upgrade of sless that changes
// a runtime wrapper rebuilds it — and each is a revision of its own name,
// across restarts too: the plain <function>-<generation> is the first one's
// only, never handed to a third spec after a suffixed second. Every name
// is a DNS label of at most 63 characters, as a cluster's: a 52-character
// function at generation 100000 was <name>-100000-<5 hex>, 65.
func TestServerNamesEachRebuildOfAGeneration(t *testing.T) {
	long := "rebuilt-" + strings.Repeat("x", slessv1alpha1.MaxNameLength-len("rebuilt-"))
	for _, tc := range []struct {
		name  string
		gen   int64
		first string
	}{
		{"rebuilt", 1, "rebuilt-00001"},
		{long, 100000, long + "-a0000"},
	} {
		t.Run(fmt.Sprintf("%d characters, generation %d", len(tc.name), tc.gen), func(t *testing.T) {
			state := filepath.Join(t.TempDir(), "serving")
			bed := newServerBedWith(t, time.Minute, func(o *ServerOptions) { o.StateDir = state })
			fn := localtest.FunctionNamed("ns", tc.name)
			fn.Generation = tc.gen
			seen := map[string]string{}
			for i, restart := range []bool{false, false, true, false, true} {
				reply := fmt.Sprintf("build-%d", i)
				img := bed.image(fn, replyCode(reply))
				if restart {
					bed.restart()
				}
				st := bed.awaitState(fn, img, func(st adapter.ServeState) bool { return st.Ready && st.ServingImage == img })
				name := st.LatestReadyRevision
				if i == 0 && name != tc.first {
					t.Fatalf("first revision %q, want %s", name, tc.first)
				}
				if !strings.HasPrefix(name, tc.first) {
					t.Fatalf("build %d: revision %q is not of generation %d", i, name, tc.gen)
				}
				if errs := validation.IsDNS1035Label(name); len(errs) > 0 {
					t.Fatalf("build %d: revision %q (%d characters) is not a DNS label: %v", i, name, len(name), errs)
				}
				if prev, dup := seen[name]; dup {
					t.Fatalf("build %d is served as %q, the name of %s", i, name, prev)
				}
				seen[name] = reply
				if body, _, err := bed.call("ns", tc.name); err != nil || !strings.Contains(body, reply) || !strings.Contains(body, name) {
					t.Fatalf("build %d: %s %v", i, body, err)
				}
			}
		})
	}
}

// A chatty function's log is rotated: however much it prints, at most
// LogMaxFiles files of at most LogMaxBytes each are kept, and its newest
// lines are in <name>.log. The file grew without bound before.
func TestServerRotatesFunctionLogs(t *testing.T) {
	bed := newServerBedWith(t, time.Minute, func(o *ServerOptions) { o.LogMaxBytes, o.LogMaxFiles = 8<<10, 3 })
	fn := localtest.FunctionNamed("ns", "chatty")
	fn.Generation = 1
	img := bed.image(fn, "def handler(event, context):\n"+
		"    for i in range(2000):\n"+
		"        print('chatter %04d ' % i + 'x' * 60)\n"+
		"    print('the last line')\n"+
		"    return 'done'\n")
	bed.awaitState(fn, img, ready)
	if body, _, err := bed.call("ns", "chatty"); err != nil || !strings.Contains(body, "done") {
		t.Fatalf("call = %s, %v", body, err)
	}
	dir := filepath.Join(bed.opts.LogDir, "ns")
	current := filepath.Join(dir, "chatty.log")
	// The output reaches the file through a pipe: wait for the last line.
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(current)
		if strings.Contains(string(b), "the last line") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the last line is not in %s: …%s", current, b[max(len(b)-300, 0):])
		}
		time.Sleep(20 * time.Millisecond)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		if info.Size() > 8<<10 {
			t.Errorf("%s has %d bytes, past the 8 KiB limit", e.Name(), info.Size())
		}
	}
	if want := []string{"chatty.log", "chatty.log.1", "chatty.log.2"}; !slices.Equal(names, want) {
		t.Errorf("log files %v, want %v", names, want)
	}
	older, _ := os.ReadFile(filepath.Join(dir, "chatty.log.1"))
	if !strings.Contains(string(older), "chatter 19") {
		t.Errorf("chatty.log.1 does not hold the lines just before the newest: …%s", older[max(len(older)-200, 0):])
	}
	// The logs API reads them back: the last lines across the rotated
	// files, each stamped when written, the call's tagged with its id.
	src := &Logs{LogDir: bed.opts.LogDir}
	var got []logs.Line
	if err := src.Function(context.Background(), fn, logs.Query{Tail: 3}, func(l logs.Line) error {
		got = append(got, l)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("tail 3 gave %d lines", len(got))
	}
	if !strings.Contains(got[1].Text, "the last line") || logs.InvocationOf(got[1].Text) == "" {
		t.Errorf("the handler's last print is not the line before the wrapper's request line, tagged: %q", got[1].Text)
	}
	for _, l := range got {
		if time.Since(l.Time) > time.Minute || time.Since(l.Time) < 0 {
			t.Errorf("line %q stamped %v", l.Text, l.Time)
		}
	}
}

// A kept-up revision (min scale 1) whose process is killed is started
// again on its own, each crash in a row waiting twice as long; a second
// crash before it stayed up CrashReset reports the revision failed with
// the exit code, as Knative's ContainerHealthy=False does, and staying up
// makes it Ready again.
func TestServerRestartsCrashesWithBackoff(t *testing.T) {
	bed := newServerBedWith(t, 2*time.Second, func(o *ServerOptions) {
		o.CrashBackoff, o.CrashBackoffMax, o.CrashReset = 150*time.Millisecond, time.Second, 1500*time.Millisecond
	})
	fn := localtest.FunctionNamed("ns", "crashy")
	fn.Generation = 1
	fn.Spec.Scale = &slessv1alpha1.ScaleSpec{Min: ptr.To[int32](1)}
	img := bed.image(fn, replyCode("up"))
	bed.awaitState(fn, img, ready)

	// crash kills the running process and waits for another; it returns
	// how long the restart took.
	crash := func() time.Duration {
		t.Helper()
		var pids []int
		for deadline := time.Now().Add(10 * time.Second); len(pids) != 1; pids = bed.server.Processes("ns", "crashy") {
			if time.Now().After(deadline) {
				t.Fatalf("processes: %v", pids)
			}
			time.Sleep(10 * time.Millisecond)
		}
		killed := time.Now()
		if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		awaitExit(t, pids[0], 5*time.Second)
		for deadline := time.Now().Add(10 * time.Second); ; {
			if p := bed.server.Processes("ns", "crashy"); len(p) == 1 && p[0] != pids[0] {
				return time.Since(killed)
			}
			if time.Now().After(deadline) {
				t.Fatal("not restarted within 10 s")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if took := crash(); took < 150*time.Millisecond {
		t.Errorf("first restart after %s, before its backoff of 150ms", took)
	}
	if st, _ := bed.server.EnsureService(context.Background(), fn, img); !st.Ready {
		t.Errorf("one crash is not a loop: %+v", st)
	}
	if took := crash(); took < 300*time.Millisecond {
		t.Errorf("second restart after %s, before its backoff of 300ms", took)
	}
	st, _ := bed.server.EnsureService(context.Background(), fn, img)
	if st.Ready || !st.Failed || st.Reason != "ExitCode137" || !strings.Contains(st.Message, "2 times in a row") || st.LatestReadyRevision != "crashy-00001" {
		t.Fatalf("after two crashes in a row: %+v", st)
	}
	if body, _, err := bed.call("ns", "crashy"); err != nil || !strings.Contains(body, `"up"`) {
		t.Fatalf("a crash-looping revision still takes calls: %s %v", body, err)
	}
	bed.awaitState(fn, img, ready)
}
