package serving

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sless-dev/sless/pkg/adapter"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/local/proc"
	"github.com/sless-dev/sless/pkg/logs"
	"github.com/sless-dev/sless/pkg/names"
	"github.com/sless-dev/sless/runtimes"
)

// ServerOptions configure a Server.
type ServerOptions struct {
	// Dir maps an image the Builder made onto its directory (Builder.Dir).
	Dir func(image string) (string, error)
	// IdleTimeout is how long an instance runs without a call before it is
	// stopped (scale to zero). Default 60 s.
	IdleTimeout time.Duration
	// StartTimeout bounds one start, from exec to a healthy answer. Default 60 s.
	StartTimeout time.Duration
	// DrainGrace is how long a revision that lost its traffic (or an idle
	// instance being stopped) may still receive calls handed out just before;
	// then it gets SIGTERM, on which the wrapper finishes the calls it has.
	// Default 1 s.
	DrainGrace time.Duration
	// Tools names python3, node and go (see runtimes.LocalOptions).
	Tools runtimes.LocalOptions
	// LogDir receives <namespace>/<name>.log, the output of the function's
	// processes, each line stamped with its time (logs.Stamper). Empty: no
	// log files.
	LogDir string
	// LogMaxBytes is the size at which a log file is rotated: it becomes
	// <name>.log.1, an older .1 becomes .2, and so on. Default
	// DefaultLogMaxBytes.
	LogMaxBytes int64
	// LogMaxFiles is how many files of a function's log are kept, the
	// current one included; older ones are removed. Default
	// DefaultLogMaxFiles.
	LogMaxFiles int
	// Console, when set, also receives every output line, prefixed with
	// [namespace/name].
	Console io.Writer
	// ResolveEnv gives the value of an env entry with valueFrom (a Secret or
	// ConfigMap key); nil refuses such entries.
	ResolveEnv func(ctx context.Context, namespace string, src *corev1.EnvVarSource) (string, error)
	// Address tells what ServeState.Address says for a function; the invoke
	// path uses Activate, not this. Default "local://<namespace>/<name>".
	Address func(namespace, name string) string
	// OnChange is called (in its own goroutine) when a function's serving
	// state changed on its own: a new revision became ready or failed, or a
	// failed one is due for another start.
	OnChange func(namespace, name string)
	// RetryBackoff is the wait before a revision whose start failed is
	// started again (it doubles per failure up to five minutes), as a
	// crash-looping pod is restarted. Default 10 s.
	RetryBackoff time.Duration
	// CrashBackoff is the wait before an instance of a revision kept up
	// (minScale above zero) that exited on its own is started again; it
	// doubles per crash in a row up to CrashBackoffMax, as the kubelet's
	// CrashLoopBackOff does. Defaults 1 s and 1 min.
	CrashBackoff    time.Duration
	CrashBackoffMax time.Duration
	// CrashReset is how long an instance must stay up for its revision's
	// crashes in a row to be forgotten. Default 30 s.
	CrashReset time.Duration
	// Kind names what the server runs in its log lines and console prefix:
	// "function" (the default) or "service". A service's lines say
	// service=ns/name and its output is prefixed [svc:ns/name].
	Kind string
	// Logger, when set, is told of rollouts, process starts and stops and
	// cold starts (sless dev's terminal lines).
	Logger *slog.Logger
	// StateDir keeps, per function, the revision that serves it
	// (<namespace>/<name>.json), and NewServer serves those revisions
	// again. On a cluster Revisions outlive the controller; without this a
	// restarted server would know only the revision the reconciler asks
	// for, which may be the one that fails, and nothing at all of a
	// function whose latest build failed (the reconciler then asks for
	// none). Empty: nothing is kept.
	StateDir string
	// SealState and OpenState, when set, encrypt a state file and decrypt
	// it: the env it records holds the values resolved from Secrets, which
	// must not rest on disk in the clear. A file that does not open is not
	// served again (the reconciler asks for a revision anew).
	SealState func(key types.NamespacedName, plain []byte) []byte
	OpenState func(key types.NamespacedName, sealed []byte) ([]byte, error)
	// Procs starts the processes, contained and limited by the function's
	// memoryMB and cpu (see proc.Supervisor); nil: no limits, no records.
	Procs *proc.Supervisor
	// PidsLimit bounds the processes and threads of one instance. Default
	// DefaultPidsLimit.
	PidsLimit int64
	// DefaultResources fill each resource a spec names nowhere, as the
	// cluster's site defaults do.
	DefaultResources *slessv1alpha1.ResourceSpec
	// VolumeDir keeps each instance's Secret and ConfigMap files and
	// emptyDir directories, removed when it exits.
	VolumeDir string
	// ResolveFiles gives the keys of a Secret or ConfigMap (FilesSecret,
	// FilesConfigMap) of a namespace, for volumes; nil refuses them.
	ResolveFiles func(ctx context.Context, namespace, kind, name string) (map[string][]byte, error)
}

// DefaultPidsLimit is ServerOptions.PidsLimit's default: room for any
// runtime's threads and a handler's children, not for a fork bomb.
const DefaultPidsLimit = 1024

// Server is adapter.Server for one machine: every revision of a function is a
// runtime wrapper process (runtimes.LocalCommand) on a free loopback port.
//
//   - A new revision (a changed image, environment or timeout) is started
//     once to prove it serves, as Knative does; traffic moves to it only when
//     it answered its health check, and the revision it replaces keeps
//     serving until then and drains afterwards.
//   - An instance with no call for IdleTimeout is stopped (scale to zero,
//     unless spec.scale.min is above zero); Activate starts it again and
//     holds the call until it is healthy. Concurrent calls during a start
//     share it.
//   - Stopping is SIGTERM after DrainGrace: the wrapper stops accepting and
//     finishes its in-flight calls, so no accepted call is cut.
type Server struct {
	opts ServerOptions

	mu   sync.Mutex
	fns  map[types.NamespacedName]*service
	done chan struct{}
	wg   sync.WaitGroup

	// procs holds every process that runs, whoever started it: an
	// instance the reaper idles out drains on a goroutine of its own, and
	// a start may be under way while Close runs, so Close stops what is
	// left here rather than trusting the revisions to know it all. Once
	// closed, no process starts.
	procMu sync.Mutex
	procs  map[*instance]struct{}
	closed bool

	// logs are the functions' log files by path: every process of a
	// function writes to one, so that they rotate it together.
	logMu sync.Mutex
	logs  map[string]*logFile
}

var _ adapter.Server = (*Server)(nil)

type service struct {
	key types.NamespacedName
	// active serves calls; nil until the first revision is ready.
	active *revision
	// latest is the newest revision: active, starting, or failed.
	latest *revision
	// routes split the calls as spec.traffic asks; none sends them all to
	// active. pinned are the revisions they name besides active, kept out
	// of rotation; past the revisions that served, which they may name.
	routes []route
	pinned map[string]*revision
	past   []pastRevision
	// trafficReason and trafficMessage say why spec.traffic is not served
	// (it names a revision that never served); the routes before serve.
	trafficReason, trafficMessage string
}

// Reasons a local server reports.
const (
	ReasonDeploying         = "Deploying"
	ReasonRevisionFailed    = "RevisionFailed"
	ReasonImageNotSupported = "ImageNotSupported"
	ReasonEnvUnresolved     = "EnvUnresolved"
	// ReasonResourceNotSupported: the spec asks for a resource one
	// machine's processes cannot have (a GPU).
	ReasonResourceNotSupported = "ResourceNotSupported"
	// ReasonOOMKilled: the process exceeded its memory limit and the
	// kernel killed it, as a container's termination reason says.
	ReasonOOMKilled = "OOMKilled"
)

// memoryOf words a memory limit.
func memoryOf(l proc.Limits) string {
	return "memory " + resource.NewQuantity(l.MemoryBytes, resource.BinarySI).String()
}

// crashLoopAfter is how many crashes in a row make a serving revision
// report Ready=False: one crash restarted at once is a blip, a second
// before the instance stayed up CrashReset is a loop.
const crashLoopAfter = 2

// CrashReason is the reason a crash-looping revision reports, Knative's
// for a container that exited with code (ExitCode1, ExitCode137).
func CrashReason(code int) string { return "ExitCode" + strconv.Itoa(code) }

// ErrNoRevision is returned by Activate for a function with no ready revision.
var ErrNoRevision = errors.New("the function has no ready revision")

// NewServer makes a server and starts its idle reaper.
func NewServer(opts ServerOptions) *Server {
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = 60 * time.Second
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 60 * time.Second
	}
	if opts.DrainGrace <= 0 {
		opts.DrainGrace = time.Second
	}
	if opts.RetryBackoff <= 0 {
		opts.RetryBackoff = 10 * time.Second
	}
	if opts.CrashBackoff <= 0 {
		opts.CrashBackoff = time.Second
	}
	if opts.CrashBackoffMax <= 0 {
		opts.CrashBackoffMax = time.Minute
	}
	if opts.CrashReset <= 0 {
		opts.CrashReset = 30 * time.Second
	}
	if opts.Kind == "" {
		opts.Kind = "function"
	}
	if opts.Address == nil {
		opts.Address = func(ns, name string) string { return "local://" + ns + "/" + name }
	}
	if opts.OnChange == nil {
		opts.OnChange = func(string, string) {}
	}
	if opts.LogMaxBytes <= 0 {
		opts.LogMaxBytes = DefaultLogMaxBytes
	}
	if opts.LogMaxFiles <= 0 {
		opts.LogMaxFiles = DefaultLogMaxFiles
	}
	if opts.PidsLimit <= 0 {
		opts.PidsLimit = DefaultPidsLimit
	}
	s := &Server{opts: opts, fns: map[types.NamespacedName]*service{}, done: make(chan struct{}), procs: map[*instance]struct{}{},
		logs: map[string]*logFile{}}
	s.restore()
	s.wg.Add(1)
	go s.reap()
	return s
}

// EnsureService makes the function's latest revision match fn and image and
// reports on it. It never waits for a process: a new revision starts in the
// background and OnChange tells when it is ready or failed.
func (s *Server) EnsureService(ctx context.Context, fn slessv1alpha1.Workload, image string) (adapter.ServeState, error) {
	key := types.NamespacedName{Namespace: fn.GetNamespace(), Name: fn.GetName()}
	spec, reason, err := s.revisionSpec(ctx, fn, image)
	if err != nil {
		// The function cannot be served as it stands; an earlier revision, if
		// any, keeps serving.
		st := s.state(key)
		st.Ready, st.Failed = false, true
		st.Reason, st.Message = reason, err.Error()
		st.Image = pinnedOrNone(image)
		return st, nil
	}
	s.mu.Lock()
	select {
	case <-s.done:
		// A rollout begun now would start a process Close no longer stops.
		s.mu.Unlock()
		return adapter.ServeState{}, errServerClosed
	default:
	}
	svc := s.fns[key]
	created, updated := svc == nil, false
	if svc == nil {
		svc = &service{key: key}
		s.fns[key] = svc
	}
	if svc.latest == nil || svc.latest.hash != spec.hash {
		updated = !created
		// A generation's first revision is named as on a cluster
		// (names.Revision). Another spec for the same generation (a rebuild
		// after an upgrade of sless changed the runtime wrapper) gets its
		// hash as a suffix: also when the one it replaces was itself such a
		// revision, or the plain name would come back for a third spec, two
		// revisions under one name. Four hex digits and a dash take the
		// room names.Revision leaves for a cluster's -warm, so the name is
		// a DNS label there too.
		name := names.Revision(fn)
		if ofGeneration(svc.latest, name) || ofGeneration(svc.active, name) {
			name += "-" + spec.hash[:4]
		}
		r := newRevision(s, key, name, spec)
		if fn.BuildSpec().HasPlacement() {
			// Told, not refused: the same spec runs unchanged on a cluster.
			s.logf(slog.LevelWarn, PlacementIgnored, s.opts.Kind, key.String(), "revision", name)
		}
		if fn.BuildSpec().LimitsEgress() {
			s.logf(slog.LevelWarn, EgressIgnored, s.opts.Kind, key.String(), "revision", name)
		}
		if prev := svc.latest; prev != nil && prev != svc.active {
			// A revision that never got traffic is replaced outright.
			go s.retire(prev, 0)
		}
		svc.latest = r
		s.wg.Add(1)
		go s.rollout(svc, r)
	} else {
		r := svc.latest
		r.mu.Lock()
		rescaled := r.minScale != spec.minScale
		r.minScale = spec.minScale
		retry := r.failure != "" && r.starting == nil && !r.retired && time.Now().After(r.retryAt)
		if retry {
			// Its backoff passed: start it again, as a crash-looping pod is.
			r.failure = ""
		}
		r.mu.Unlock()
		if rescaled && r == svc.active {
			s.save(svc.key, r)
		}
		if retry {
			s.wg.Add(1)
			go s.rollout(svc, r)
		}
	}
	svc.trafficReason, svc.trafficMessage = s.setTraffic(svc, fn.BuildSpec().Traffic)
	s.mu.Unlock()
	st := s.state(key)
	st.Created, st.Updated = created, updated
	st.Image = pinnedOrNone(image)
	return st, nil
}

// pinnedOrNone is image when it names its digest, as every local build
// does; a prebuilt image given by tag is never resolved here (local mode
// serves no images).
func pinnedOrNone(image string) string {
	if adapter.Pinned(image) {
		return image
	}
	return ""
}

// Observe reports the function's revisions as they stand.
func (s *Server) Observe(_ context.Context, fn slessv1alpha1.Workload) (adapter.ServeState, bool, error) {
	key := types.NamespacedName{Namespace: fn.GetNamespace(), Name: fn.GetName()}
	s.mu.Lock()
	defer s.mu.Unlock()
	// One hold of the lock: a function removed between a presence test and
	// the read would report "no revision yet" as if it were present.
	if _, found := s.fns[key]; !found {
		return adapter.ServeState{}, false, nil
	}
	return s.stateLocked(key), true, nil
}

func (s *Server) state(key types.NamespacedName) adapter.ServeState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stateLocked(key)
}

// stateLocked is state for a caller that holds s.mu.
func (s *Server) stateLocked(key types.NamespacedName) adapter.ServeState {
	svc := s.fns[key]
	st := adapter.ServeState{Address: s.opts.Address(key.Namespace, key.Name)}
	if svc == nil {
		st.Reason, st.Message = ReasonDeploying, "no revision yet"
		return st
	}
	if svc.active != nil {
		st.LatestReadyRevision = svc.active.name
		st.ServingImage = pinnedOrNone(svc.active.spec.image)
	}
	st.Traffic = svc.trafficState()
	if r := svc.latest; r != nil {
		st.Revision, st.LatestCreatedRevision = r.name, r.name
		r.mu.Lock()
		failure := r.failure
		crash := r.crash
		r.mu.Unlock()
		switch {
		case svc.active == r && crash.count >= crashLoopAfter && crash.oom:
			st.Failed = true
			st.Reason = ReasonOOMKilled
			st.Message = fmt.Sprintf("revision %s: the process exceeded its memory limit (%s) and was killed (OOMKilled, exit code %d), %d times in a row; restarting with backoff",
				r.name, memoryOf(r.spec.limits), crash.code, crash.count)
		case svc.active == r && crash.count >= crashLoopAfter:
			// As Knative's ContainerHealthy=False: the revision still takes
			// calls (each starts an instance), but it does not stay up.
			st.Failed = true
			st.Reason = CrashReason(crash.code)
			st.Message = fmt.Sprintf("revision %s: the process exited with code %d, %d times in a row; restarting with backoff. Last output: %s",
				r.name, crash.code, crash.count, crash.output)
		case svc.active == r:
			st.Ready = true
		case failure != "":
			st.Failed = true
			st.Reason, st.Message = ReasonRevisionFailed, fmt.Sprintf("revision %s did not start: %s", r.name, failure)
		default:
			st.Reason, st.Message = ReasonDeploying, fmt.Sprintf("starting revision %s", r.name)
		}
	}
	if svc.trafficReason != "" && !st.Failed {
		st.Ready, st.Failed = false, svc.trafficReason == ReasonRevisionMissing
		st.Reason, st.Message = svc.trafficReason, svc.trafficMessage
	}
	return st
}

// servingSpec is what revision name of function key runs while it is the
// revision that serves: its build, its env (valueFrom resolved when it
// rolled out) and its timeout, which a FunctionJob run of it takes rather
// than the function's spec, which may already be a newer revision's.
// false when another revision serves, or none.
func (s *Server) servingSpec(key types.NamespacedName, name string) (revisionSpec, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	svc := s.fns[key]
	if svc == nil || svc.active == nil || svc.active.name != name {
		return revisionSpec{}, false
	}
	return svc.active.spec, true
}

// PlacementIgnored is the warning for a spec that asks where it runs, for
// each revision served and each FunctionJob run of it.
const PlacementIgnored = "placement ignored: one machine runs every process; nodeSelector, tolerations, affinity, " +
	"priorityClassName and runtimeClassName apply on a cluster"

// EgressIgnored is the warning for a spec that limits egress, which only a
// cluster's NetworkPolicies enforce.
const EgressIgnored = "spec.network ignored: local processes reach what the machine reaches; " +
	"egress none and listed apply on a cluster with NetworkPolicies enforced"

// JobRun is what a FunctionJob run of a serving revision takes from it:
// its build directory, its env (secrets resolved) and its timeout.
type JobRun struct {
	Dir            string
	Env            []string
	TimeoutSeconds int32
	Limits         proc.Limits
}

// ServingRun is how a job runs revision name of function key, which must
// be the revision it serves; false when it is not.
func (s *Server) ServingRun(key types.NamespacedName, name string) (JobRun, bool) {
	spec, ok := s.servingSpec(key, name)
	return JobRun{Dir: spec.dir, Env: spec.env, TimeoutSeconds: spec.timeout, Limits: spec.limits}, ok
}

// Tools are the runtimes' tools the server starts processes with.
func (s *Server) Tools() runtimes.LocalOptions { return s.opts.Tools }

// Procs is the supervisor the server starts processes with.
func (s *Server) Procs() *proc.Supervisor { return s.opts.Procs }

// revisionSpec is what a revision runs, and a hash of it that tells whether
// fn and image still match the latest revision.
type revisionSpec struct {
	dir      string
	image    string
	env      []string
	timeout  int32
	minScale int32
	// concurrency is spec.containerConcurrency: the calls the instance
	// takes at once; 0 is no limit.
	concurrency int64
	// limits are memoryMB, cpu (a request, as on a cluster) and the
	// process count.
	limits proc.Limits
	hash   string
	// sourceDigest is the build context's digest, when built from source;
	// it is told, and not part of hash: image already differs with it.
	sourceDigest string
	// volumes are spec.volumes, mounted in each instance's view.
	volumes []slessv1alpha1.Volume
}

func (s *Server) revisionSpec(ctx context.Context, fn slessv1alpha1.Workload, image string) (revisionSpec, string, error) {
	dir, err := s.opts.Dir(image)
	if err != nil {
		return revisionSpec{}, ReasonImageNotSupported, err
	}
	limits, err := s.limitsOf(fn.BuildSpec())
	if err != nil {
		return revisionSpec{}, ReasonResourceNotSupported, err
	}
	if i, msg := CheckLocalVolumes(fn.BuildSpec().Volumes); msg != "" {
		return revisionSpec{}, ReasonVolumeNotSupported, fmt.Errorf("spec.volumes[%d]: %s", i, msg)
	}
	spec := revisionSpec{dir: dir, image: image, timeout: fn.Timeout(), limits: limits,
		sourceDigest: fn.WorkloadStatus().SourceDigest}
	for _, v := range fn.BuildSpec().Volumes {
		spec.volumes = append(spec.volumes, *v.DeepCopy())
	}
	if sc := fn.BuildSpec().Scale; sc != nil {
		if sc.Min != nil {
			spec.minScale = *sc.Min
		}
		if sc.ContainerConcurrency != nil {
			spec.concurrency = *sc.ContainerConcurrency
		}
	}
	for _, e := range fn.BuildSpec().Env {
		v := e.Value
		if e.ValueFrom != nil {
			if s.opts.ResolveEnv == nil {
				return revisionSpec{}, ReasonEnvUnresolved, fmt.Errorf("env %s: valueFrom is not available in local mode; give a value", e.Name)
			}
			if v, err = s.opts.ResolveEnv(ctx, fn.GetNamespace(), e.ValueFrom); err != nil {
				return revisionSpec{}, ReasonEnvUnresolved, fmt.Errorf("env %s: %w", e.Name, err)
			}
		}
		spec.env = append(spec.env, e.Name+"="+v)
	}
	spec.hash = specHash(spec)
	return spec, "", nil
}

// limitsOf is what a revision of sp may use, as the Knative Service asks
// for it: the memory limit, the CPU request and limit. ok is false, with
// why, for what one machine cannot give (an extended resource: a GPU).
func (s *Server) limitsOf(sp *slessv1alpha1.FunctionSpec) (proc.Limits, error) {
	rr := sp.ResourceRequirements(s.opts.DefaultResources)
	if ext := slessv1alpha1.ExtendedResources(rr); len(ext) > 0 {
		return proc.Limits{}, fmt.Errorf("spec.resources.limits asks for %s: local mode runs functions as processes "+
			"and gives them no extended resources (GPUs); remove it here, or run the function on a cluster", strings.Join(ext, ", "))
	}
	l := proc.Limits{Pids: s.opts.PidsLimit}
	if m, ok := rr.Limits[corev1.ResourceMemory]; ok {
		l.MemoryBytes = m.Value()
	}
	if c, ok := rr.Requests[corev1.ResourceCPU]; ok {
		l.CPURequestMilli = c.MilliValue()
	}
	if c, ok := rr.Limits[corev1.ResourceCPU]; ok {
		l.CPULimitMilli = c.MilliValue()
	}
	return l, nil
}

// specHash tells revisions apart by what they run. minScale is left out:
// changing it changes how many instances run, not what they run (Knative
// makes a new revision for it; locally there is no need).
// ofGeneration tells whether r is a revision of the generation whose first
// revision is named base: base itself or base with a hash suffix.
func ofGeneration(r *revision, base string) bool {
	return r != nil && (r.name == base || strings.HasPrefix(r.name, base+"-"))
}

func specHash(spec revisionSpec) string {
	parts := []any{spec.image, spec.env, spec.timeout, spec.concurrency, spec.limits}
	if len(spec.volumes) > 0 {
		// Appended only when set, so revisions without volumes keep their hash.
		parts = append(parts, spec.volumes)
	}
	raw, _ := json.Marshal(parts)
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:])
}

// rollout starts a new revision once and moves traffic to it when healthy.
func (s *Server) rollout(svc *service, r *revision) {
	defer s.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-s.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	defer cancel()
	_, _, err := r.ensure(ctx)
	s.mu.Lock()
	if s.fns[svc.key] != svc || svc.latest != r {
		// Replaced or removed while starting.
		s.mu.Unlock()
		s.retire(r, 0)
		return
	}
	var old *revision
	if err == nil {
		old = svc.active
		svc.active = r
		svc.remember(r)
		if old != nil && old != r && svc.named(old.name) {
			// Its traffic names it: it keeps serving its share.
			if svc.pinned == nil {
				svc.pinned = map[string]*revision{}
			}
			svc.pinned[old.name], old = old, nil
		}
		r.mu.Lock()
		r.failures = 0
		r.mu.Unlock()
		// Under s.mu, so that the file follows the order revisions took
		// traffic in.
		s.save(svc.key, r)
	} else {
		r.mu.Lock()
		wait := min(s.opts.RetryBackoff<<min(r.failures, 10), 5*time.Minute)
		r.failures++
		r.retryAt = time.Now().Add(wait)
		r.mu.Unlock()
		time.AfterFunc(wait, func() { s.opts.OnChange(svc.key.Namespace, svc.key.Name) })
	}
	s.mu.Unlock()
	if err == nil {
		args := []any{s.opts.Kind, svc.key.String(), "revision", r.name}
		if old != nil && old != r {
			args = append(args, "replaces", old.name)
		}
		s.logf(slog.LevelInfo, "revision ready", args...)
	} else if !errors.Is(err, errServerClosed) && !errors.Is(err, context.Canceled) {
		s.logf(slog.LevelWarn, "revision failed", s.opts.Kind, svc.key.String(), "revision", r.name, "error", err.Error())
	}
	s.opts.OnChange(svc.key.Namespace, svc.key.Name)
	if old != nil && old != r {
		s.retire(old, s.opts.DrainGrace)
	}
}

// Call is one call's hold on an instance, from Activate until Done: the
// instance takes no more calls at once than the revision's
// containerConcurrency, and is not stopped as idle while a call holds it.
type Call struct {
	// URL is where the instance listens.
	URL *url.URL
	// Revision is the revision serving the call.
	Revision string
	// Cold is true when the call waited for the instance to start.
	Cold bool

	r    *revision
	inst *instance
	once sync.Once
}

// Lost tells why the call's instance went away under it, once it has
// exited ("" if it runs on, or was stopped on purpose): for the record of
// a call whose forward failed.
func (c *Call) Lost() string {
	if c.inst == nil {
		return ""
	}
	select {
	case <-c.inst.exited:
	case <-time.After(time.Second):
		return "" // still up: the connection failed for another reason
	}
	return c.inst.exitReason()
}

// Done ends the call's hold; later calls, and calls on a Call that
// Activate failed, do nothing.
func (c *Call) Done() {
	if c.r != nil {
		c.once.Do(c.r.release)
	}
}

// Activate makes sure the function's serving revision has a running
// instance that can take one more call, starting one if needed (Cold is
// then true), and holds it for the call until Done. It waits at most until
// ctx ends; a call that found every slot of the instance taken until then
// fails with invoke.ErrBusy.
func (s *Server) Activate(ctx context.Context, namespace, name string) (*Call, error) {
	return s.activate(ctx, types.NamespacedName{Namespace: namespace, Name: name}, func(svc *service) (*revision, error) {
		return svc.pick(), nil
	})
}

// activate is Activate of the revision choose picks, under s.mu, from the
// function's service.
func (s *Server) activate(ctx context.Context, key types.NamespacedName, choose func(*service) (*revision, error)) (*Call, error) {
	begin := time.Now()
	for {
		s.mu.Lock()
		svc := s.fns[key]
		var r *revision
		var err error
		if svc != nil {
			r, err = choose(svc)
		}
		s.mu.Unlock()
		if err != nil {
			return nil, err
		}
		if r == nil {
			return nil, ErrNoRevision
		}
		inst, cold, err := r.acquire(ctx)
		if errors.Is(err, errRetired) {
			continue // traffic moved on between the lookup and the acquire
		}
		if err != nil {
			return &Call{Revision: r.name, Cold: cold}, err
		}
		if cold {
			s.logf(slog.LevelInfo, "cold start", s.opts.Kind, key.String(), "revision", r.name,
				"took", time.Since(begin).Round(time.Millisecond))
		}
		return &Call{URL: inst.url, Revision: r.name, Cold: cold, r: r, inst: inst}, nil
	}
}

// Serving tells the revision that serves the function and whether an
// instance of it runs now (false: the next call is a cold start).
func (s *Server) Serving(namespace, name string) (revisionName string, running bool, ok bool) {
	s.mu.Lock()
	svc := s.fns[types.NamespacedName{Namespace: namespace, Name: name}]
	var r *revision
	if svc != nil {
		r = svc.active
	}
	s.mu.Unlock()
	if r == nil {
		return "", false, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.name, r.inst != nil && r.starting == nil, true
}

// Processes lists the PIDs running for a function (all revisions).
func (s *Server) Processes(namespace, name string) []int {
	s.mu.Lock()
	svc := s.fns[types.NamespacedName{Namespace: namespace, Name: name}]
	var revs []*revision
	if svc != nil {
		revs = svc.revisions()
	}
	s.mu.Unlock()
	var pids []int
	for _, r := range revs {
		if r == nil {
			continue
		}
		r.mu.Lock()
		if r.inst != nil {
			pids = append(pids, r.inst.cmd.Process.Pid)
		}
		r.mu.Unlock()
	}
	return pids
}

// Remove stops every process of a function and forgets it (the function was
// deleted: on a cluster garbage collection removes its Knative Service).
func (s *Server) Remove(namespace, name string) {
	key := types.NamespacedName{Namespace: namespace, Name: name}
	s.mu.Lock()
	svc := s.fns[key]
	delete(s.fns, key)
	s.forget(key)
	s.mu.Unlock()
	if svc == nil {
		return
	}
	for _, r := range svc.revisions() {
		s.retire(r, 0)
	}
}

// revisions are the revisions of svc that may run: active, latest and
// pinned, each once.
func (svc *service) revisions() []*revision {
	var out []*revision
	for _, r := range append([]*revision{svc.active, svc.latest}, slices.Collect(maps.Values(svc.pinned))...) {
		if r != nil && !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}

// Functions lists the functions the server serves or deploys, restored
// ones included.
func (s *Server) Functions() []types.NamespacedName {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make([]types.NamespacedName, 0, len(s.fns))
	for k := range s.fns {
		keys = append(keys, k)
	}
	return keys
}

// savedRevision is what StateDir keeps of the revision serving a function:
// enough to run it again without the Function's spec, which by then may
// describe a revision that fails.
type savedRevision struct {
	Name         string                 `json:"name"`
	Created      time.Time              `json:"created,omitzero"`
	Image        string                 `json:"image"`
	SourceDigest string                 `json:"sourceDigest,omitempty"`
	Env          []string               `json:"env,omitempty"`
	Timeout      int32                  `json:"timeoutSeconds"`
	Concurrency  int64                  `json:"containerConcurrency,omitempty"`
	MinScale     int32                  `json:"minScale,omitempty"`
	Limits       proc.Limits            `json:"limits"`
	Volumes      []slessv1alpha1.Volume `json:"volumes,omitempty"`
	// Past are the revisions that served before, oldest first, which
	// traffic may name again.
	Past []savedRevision `json:"past,omitempty"`
}

func savedOf(name string, created time.Time, spec revisionSpec) savedRevision {
	return savedRevision{Name: name, Created: created, Image: spec.image, SourceDigest: spec.sourceDigest, Env: spec.env,
		Timeout: spec.timeout, Concurrency: spec.concurrency, Limits: spec.limits, Volumes: spec.volumes}
}

// spec is what a saved revision runs, nil when its build is gone.
func (s *Server) savedSpec(saved savedRevision) (revisionSpec, bool) {
	dir, err := s.opts.Dir(saved.Image)
	if err != nil {
		return revisionSpec{}, false
	}
	spec := revisionSpec{dir: dir, image: saved.Image, env: saved.Env, timeout: saved.Timeout,
		minScale: saved.MinScale, concurrency: saved.Concurrency, limits: saved.Limits, sourceDigest: saved.SourceDigest,
		volumes: saved.Volumes}
	spec.hash = specHash(spec)
	return spec, true
}

func (s *Server) statePath(key types.NamespacedName) string {
	return filepath.Join(s.opts.StateDir, key.Namespace, key.Name+".json")
}

// save records r as the revision serving key. It is best effort: what
// fails to be kept only costs a restart the revision, as before StateDir.
func (s *Server) save(key types.NamespacedName, r *revision) {
	if s.opts.StateDir == "" {
		return
	}
	r.mu.Lock()
	minScale := r.minScale
	r.mu.Unlock()
	saved := savedOf(r.name, r.created, r.spec)
	saved.MinScale = minScale
	if svc := s.fns[key]; svc != nil {
		for _, p := range svc.past {
			if p.name != r.name {
				saved.Past = append(saved.Past, savedOf(p.name, p.created, p.spec))
			}
		}
	}
	raw, err := json.Marshal(saved)
	if err != nil {
		return
	}
	p := s.statePath(key)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return
	}
	if s.opts.SealState != nil {
		raw = s.opts.SealState(key, raw)
	}
	// 0600: env values may have come from Secrets. Renamed into place so a
	// crash leaves the previous record, not half of this one.
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, raw, 0o600); err != nil {
		return
	}
	if err := os.Rename(tmp, p); err != nil {
		_ = os.Remove(tmp)
	}
}

func (s *Server) forget(key types.NamespacedName) {
	if s.opts.StateDir != "" {
		_ = os.Remove(s.statePath(key))
	}
}

// restore serves again the revisions StateDir kept. Nothing starts here: an
// instance starts on the first call, or at once for min scale, as after an
// idle stop. A record whose build is gone is passed over; the reconciler
// then deploys the function as if it were new.
func (s *Server) restore() {
	if s.opts.StateDir == "" {
		return
	}
	nss, _ := os.ReadDir(s.opts.StateDir)
	for _, ns := range nss {
		if !ns.IsDir() {
			continue
		}
		files, _ := os.ReadDir(filepath.Join(s.opts.StateDir, ns.Name()))
		for _, f := range files {
			name, ok := strings.CutSuffix(f.Name(), ".json")
			if !ok || f.IsDir() {
				continue
			}
			key := types.NamespacedName{Namespace: ns.Name(), Name: name}
			raw, err := os.ReadFile(s.statePath(key))
			if err == nil && s.opts.OpenState != nil && !bytes.HasPrefix(raw, []byte("{")) {
				// A record written before sealing ("{...}") is read as it is,
				// and sealed when next saved.
				raw, err = s.opts.OpenState(key, raw)
			}
			var saved savedRevision
			if err != nil || json.Unmarshal(raw, &saved) != nil || saved.Name == "" {
				continue
			}
			spec, ok := s.savedSpec(saved)
			if !ok {
				continue
			}
			r := newRevision(s, key, saved.Name, spec)
			if !saved.Created.IsZero() {
				r.created = saved.Created
			}
			svc := &service{key: key, active: r, latest: r}
			for _, p := range saved.Past {
				if ps, ok := s.savedSpec(p); ok {
					svc.past = append(svc.past, pastRevision{name: p.Name, spec: ps, created: p.Created})
				}
			}
			svc.remember(r)
			s.fns[key] = svc
		}
	}
}

// Close stops every process and waits for them to exit.
func (s *Server) Close() {
	select {
	case <-s.done:
		return
	default:
	}
	close(s.done)
	s.procMu.Lock()
	s.closed = true
	s.procMu.Unlock()
	s.mu.Lock()
	var revs []*revision
	for _, svc := range s.fns {
		revs = append(revs, svc.revisions()...)
	}
	s.fns = map[types.NamespacedName]*service{}
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, r := range revs {
		if r != nil {
			wg.Add(1)
			go func(r *revision) { defer wg.Done(); s.retire(r, 0) }(r)
		}
	}
	wg.Wait()
	s.wg.Wait()
	// What the revisions did not stop: instances idled out and still in
	// their drain grace, or started by a call racing this Close. No new one
	// can start now, so this is the last of them.
	s.procMu.Lock()
	var left []*instance
	for inst := range s.procs {
		left = append(left, inst)
	}
	s.procMu.Unlock()
	for _, inst := range left {
		wg.Add(1)
		go func(inst *instance) { defer wg.Done(); inst.because("sless dev stopping"); inst.stop(0, inst.drain) }(inst)
	}
	wg.Wait()
}

// retire stops a revision from taking calls and, after grace, stops its
// instance and waits for it to exit.
func (s *Server) retire(r *revision, grace time.Duration) {
	r.mu.Lock()
	r.retired = true
	r.mu.Unlock()
	if grace > 0 {
		select {
		case <-time.After(grace):
		case <-s.done:
		}
	}
	r.stop()
}

// reap stops instances idle for IdleTimeout and keeps min-scale revisions
// running.
func (s *Server) reap() {
	defer s.wg.Done()
	tick := s.opts.IdleTimeout / 10
	tick = max(min(tick, time.Second), 10*time.Millisecond)
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
		}
		s.mu.Lock()
		var revs []*revision
		for _, svc := range s.fns {
			revs = append(revs, svc.revisions()...)
		}
		s.mu.Unlock()
		now := time.Now()
		for _, r := range revs {
			r.mu.Lock()
			idle := r.inst != nil && r.starting == nil && !r.retired && r.minScale == 0 && r.inFlight == 0 &&
				now.Sub(r.lastActivity) >= s.opts.IdleTimeout
			keepWarm := r.inst == nil && r.starting == nil && !r.retired && r.minScale > 0 && r.failure == "" &&
				!now.Before(r.crash.restartAt)
			var recovered bool
			if r.crash.count > 0 && r.inst != nil && r.starting == nil && r.inst.upFor(now) >= s.opts.CrashReset {
				// Up long enough: the run of crashes is over, and a
				// revision reported crash-looping is Ready again.
				recovered = r.crash.count >= crashLoopAfter
				r.crash = crashState{}
			}
			var inst *instance
			if idle {
				// From here on Activate starts a new instance; the old one
				// gets no new calls and drains.
				inst = r.inst
				r.inst = nil
			}
			r.mu.Unlock()
			if inst != nil {
				inst.because("idle for " + s.opts.IdleTimeout.String())
				go inst.stop(s.opts.DrainGrace, time.Duration(r.spec.timeout)*time.Second)
			}
			if keepWarm {
				go func(r *revision) { _, _, _ = r.ensure(context.Background()) }(r)
			}
			if recovered {
				s.logf(slog.LevelInfo, "process recovered", s.opts.Kind, r.key.String(), "revision", r.name, "upFor", s.opts.CrashReset)
				go s.opts.OnChange(r.key.Namespace, r.key.Name)
			}
		}
	}
}

// revision is one configuration of a function and its instance (at most one
// process: local mode scales between zero and one).
type revision struct {
	s        *Server
	key      types.NamespacedName
	name     string
	created  time.Time
	spec     revisionSpec
	hash     string
	minScale int32

	// slots holds a token per call in progress when the revision limits
	// them (containerConcurrency); nil when it does not.
	slots chan struct{}

	mu       sync.Mutex
	inst     *instance
	starting chan struct{} // non-nil while a start runs; closed when it ends
	startErr error
	// lastActivity is when a call last began or ended; inFlight counts the
	// calls between Activate and Done. An instance is idle only when none
	// is in flight.
	lastActivity time.Time
	inFlight     int
	retired      bool
	// failure is why the revision's first start failed ("" if it did not);
	// failures counts the failed starts in a row, retryAt is when the next
	// may begin.
	failure  string
	failures int
	retryAt  time.Time
	// crash is the revision's run of instances that exited on their own.
	crash crashState
}

// crashState counts the crashes in a row of a revision's instances: exits
// no one asked for, and restarts that did not become healthy.
type crashState struct {
	count int
	// code is the last exit code (128+signal for a signal), output the
	// last line the process wrote.
	code   int
	output string
	// oom: the kernel killed it for exceeding its memory limit.
	oom bool
	// restartAt is the earliest the reaper starts a kept-up revision again.
	restartAt time.Time
}

// noteCrash counts a crash of r's instance that had been up for up, and
// returns the wait before the reaper starts another. Call it with r.mu held.
func (r *revision) noteCrash(code int, oom bool, output string, up time.Duration) time.Duration {
	o := r.s.opts
	if up >= o.CrashReset {
		r.crash.count = 0
	}
	r.crash.count++
	wait := min(o.CrashBackoff<<min(r.crash.count-1, 16), o.CrashBackoffMax)
	r.crash.code, r.crash.oom, r.crash.output, r.crash.restartAt = code, oom, output, time.Now().Add(wait)
	return wait
}

// crashed tells the server's log and, once the crashes make a loop, the
// reconciler (through OnChange) of a crash noteCrash counted.
func (r *revision) crashed(code int, oom bool, count int, wait time.Duration, keptUp bool, output string) {
	s := r.s
	args := []any{s.opts.Kind, r.key.String(), "revision", r.name, "exitCode", code, "crashes", count}
	if oom {
		args = append(args, "reason", ReasonOOMKilled, "limit", memoryOf(r.spec.limits))
	}
	if keptUp {
		args = append(args, "restartIn", wait.Round(time.Millisecond))
	} else {
		args = append(args, "restart", "on the next call")
	}
	if output != "" {
		args = append(args, "lastOutput", output)
	}
	s.logf(slog.LevelWarn, "process crashed", args...)
	if count >= crashLoopAfter {
		go s.opts.OnChange(r.key.Namespace, r.key.Name)
	}
}

func newRevision(s *Server, key types.NamespacedName, name string, spec revisionSpec) *revision {
	r := &revision{s: s, key: key, name: name, created: time.Now(), spec: spec, hash: spec.hash, minScale: spec.minScale}
	if spec.concurrency > 0 {
		r.slots = make(chan struct{}, spec.concurrency)
	}
	return r
}

var errRetired = errors.New("revision retired")

// acquire takes one of the revision's call slots (waiting while all are
// taken, as Knative's queue-proxy queues calls past containerConcurrency)
// and returns the address of a running instance, counting the call in
// flight until release.
func (r *revision) acquire(ctx context.Context) (*instance, bool, error) {
	if r.slots != nil {
		select {
		case r.slots <- struct{}{}:
		case <-ctx.Done():
			return nil, false, fmt.Errorf("%w: revision %s takes %d calls at once (containerConcurrency) and they did not end in time: %w",
				invoke.ErrBusy, r.name, cap(r.slots), context.Cause(ctx))
		}
	}
	r.mu.Lock()
	r.inFlight++
	r.mu.Unlock()
	inst, cold, err := r.ensure(ctx)
	if err != nil {
		r.release()
	}
	return inst, cold, err
}

// release ends a call acquire began.
func (r *revision) release() {
	r.mu.Lock()
	r.inFlight--
	r.lastActivity = time.Now()
	r.mu.Unlock()
	if r.slots != nil {
		<-r.slots
	}
}

// ensure returns a running instance, starting one (and waiting for it)
// when none runs.
func (r *revision) ensure(ctx context.Context) (*instance, bool, error) {
	r.mu.Lock()
	if r.retired {
		r.mu.Unlock()
		return nil, false, errRetired
	}
	r.lastActivity = time.Now()
	if r.inst != nil && r.starting == nil {
		inst := r.inst
		r.mu.Unlock()
		return inst, false, nil
	}
	if r.starting == nil {
		r.starting = make(chan struct{})
		go r.start(r.starting)
	}
	ch := r.starting
	r.mu.Unlock()
	select {
	case <-ch:
	case <-ctx.Done():
		return nil, true, ctx.Err()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lastActivity = time.Now()
	if r.startErr != nil {
		return nil, true, r.startErr
	}
	if r.inst == nil {
		return nil, true, errors.New("the instance stopped right after it started")
	}
	return r.inst, true, nil
}

// start runs one instance and waits for its health check; a port taken
// between choosing and binding it is retried on another.
func (r *revision) start(done chan struct{}) {
	var inst *instance
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		inst, err = r.spawn()
		if err == nil || !errors.Is(err, errPortTaken) {
			break
		}
	}
	firstFailure := err != nil && r.s.isLatestUnready(r)
	r.mu.Lock()
	r.startErr = err
	if err == nil {
		if r.retired {
			r.mu.Unlock()
			inst.because("revision retired")
			inst.stop(0, 0)
			r.mu.Lock()
			r.startErr = errRetired
		} else {
			r.inst = inst
			r.lastActivity = time.Now()
			go r.watch(inst)
		}
	} else if r.failure == "" && firstFailure {
		r.failure = err.Error()
	}
	var crash func()
	if err != nil && !firstFailure && !r.retired && !errors.Is(err, errServerClosed) {
		// A revision that served once and now fails to start again (a
		// dependency it needs at start is down) crash-loops like one
		// whose instance exits.
		code, oom, output := -1, false, proc.LastLines(err.Error(), 1)
		var ee *exitError
		if errors.As(err, &ee) {
			code, oom, output = ee.code, ee.oom, ee.output
		}
		wait := r.noteCrash(code, oom, output, 0)
		count, keptUp := r.crash.count, r.minScale > 0
		crash = func() { r.crashed(code, oom, count, wait, keptUp, output) }
	}
	r.starting = nil
	r.mu.Unlock()
	close(done)
	if crash != nil {
		crash()
	}
}

// exitError is a start that failed because the process exited: its exit
// code and last line of output.
type exitError struct {
	code   int
	oom    bool
	output string
	err    error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func (s *Server) isLatestUnready(r *revision) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	svc := s.fns[r.key]
	return svc != nil && svc.latest == r && svc.active != r
}

// watch forgets an instance that exits on its own (a crash), so the next call
// starts another.
func (r *revision) watch(inst *instance) {
	<-inst.exited
	inst.mu.Lock()
	stopped, up := inst.reason != "", time.Since(inst.up)
	inst.mu.Unlock()
	r.mu.Lock()
	if r.inst == inst {
		r.inst = nil
	}
	if stopped {
		// Stopped on purpose (idle, retired): not a crash, and an
		// instance that lived to be stopped ends a run of them.
		looping := r.crash.count >= crashLoopAfter
		r.crash = crashState{}
		r.mu.Unlock()
		if looping {
			go r.s.opts.OnChange(r.key.Namespace, r.key.Name)
		}
		return
	}
	output := lastMessage(inst.logs.String())
	wait := r.noteCrash(inst.code, inst.oomKilled, output, up)
	count, keptUp := r.crash.count, r.minScale > 0 && !r.retired
	r.mu.Unlock()
	r.crashed(inst.code, inst.oomKilled, count, wait, keptUp, output)
}

// stop stops the revision's instance, if any, and waits for it.
func (r *revision) stop() {
	r.mu.Lock()
	inst := r.inst
	r.inst = nil
	ch := r.starting
	r.mu.Unlock()
	if ch != nil {
		<-ch // start() sees retired and stops what it started
	}
	if inst != nil {
		inst.because("revision retired")
		inst.stop(0, time.Duration(r.spec.timeout)*time.Second)
	}
}

var (
	errPortTaken    = errors.New("port taken")
	errServerClosed = errors.New("the server is closed")
)

// instance is one wrapper process.
type instance struct {
	cmd     *exec.Cmd
	p       *proc.Process
	url     *url.URL
	exited  chan struct{}
	logs    *proc.Tail
	closeFn func()
	// drain is how long the wrapper may take to finish its calls after
	// SIGTERM: the revision's timeout.
	drain time.Duration

	// fn and revision name the instance in log lines; reason is why it was
	// stopped ("" while no one stopped it: an exit is then a crash).
	fn, revision string
	// code is the exit code, set before exited is closed: 128+signal
	// when a signal ended the process, as a container runtime reports it.
	code int
	// oomKilled: the kernel killed it for exceeding its memory limit; set
	// with code.
	oomKilled bool
	limits    proc.Limits
	// ns is the function's namespace; volumes its files and mounts.
	ns      string
	volumes *instanceVolumes
	mu      sync.Mutex
	reason  string
	// up is when the instance answered its health check (zero until then).
	up time.Time
}

// upFor is how long the instance has been healthy at now (0 before).
func (inst *instance) upFor(now time.Time) time.Duration {
	inst.mu.Lock()
	defer inst.mu.Unlock()
	if inst.up.IsZero() {
		return 0
	}
	return now.Sub(inst.up)
}

// exitReason says why an exited instance ended, "" when it was stopped on
// purpose.
func (inst *instance) exitReason() string {
	inst.mu.Lock()
	stopped := inst.reason != ""
	inst.mu.Unlock()
	switch {
	case stopped:
		return ""
	case inst.oomKilled:
		return fmt.Sprintf("OOMKilled: the function's process exceeded its memory limit (%s) and was killed", memoryOf(inst.limits))
	default:
		return fmt.Sprintf("the function's process exited with code %d", inst.code)
	}
}

// because records why the instance is being stopped; the first reason
// given is kept.
func (inst *instance) because(reason string) {
	inst.mu.Lock()
	defer inst.mu.Unlock()
	if inst.reason == "" {
		inst.reason = reason
	}
}

func (r *revision) spawn() (*instance, error) {
	s := r.s
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	opts := s.opts.Tools
	opts.Port = port
	opts.Host = "127.0.0.1"
	opts.FunctionName, opts.Namespace, opts.Revision = r.key.Name, r.key.Namespace, r.name
	opts.TimeoutSeconds = float64(r.spec.timeout)
	opts.Env = r.spec.env
	cmd, err := runtimes.LocalCommand(r.spec.dir, opts)
	if err != nil {
		return nil, err
	}
	inst := &instance{cmd: cmd, exited: make(chan struct{}), logs: &proc.Tail{Max: 4096},
		url:   &url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))},
		drain: time.Duration(r.spec.timeout) * time.Second, fn: r.key.String(), revision: r.name, limits: r.spec.limits,
		ns: r.key.Namespace}
	// The files are read when the instance starts, as the kubelet's first sync.
	vols, err := s.prepareVolumes(context.Background(), r.key.Namespace, r.name, r.spec.volumes)
	if err != nil {
		return nil, err
	}
	inst.volumes = vols
	out, closeOut := s.Output(r.key)
	inst.closeFn = closeOut
	w := io.MultiWriter(out, inst.logs)
	cmd.Stdout, cmd.Stderr = w, w
	// Checking closed and registering the process in one hold of procMu
	// means Close either refuses this start or finds the process.
	s.procMu.Lock()
	if s.closed {
		s.procMu.Unlock()
		closeOut()
		vols.remove()
		return nil, errServerClosed
	}
	// A private TMPDIR, as a container's /tmp; the process group keeps a
	// Ctrl-C at the terminal from reaching it: sless dev drains it.
	p, err := s.opts.Procs.Start(cmd, proc.Spec{Name: s.opts.Kind + "." + r.key.Namespace + "." + r.name,
		Limits: r.spec.limits, TempDir: true, Mounts: vols.procMounts()})
	if err != nil {
		s.procMu.Unlock()
		closeOut()
		vols.remove()
		return nil, err
	}
	inst.p = p
	s.procs[inst] = struct{}{}
	s.procMu.Unlock()
	began := time.Now()
	go func() {
		exit, _ := p.Wait()
		if exit.OOMKilled {
			// The kubelet keeps this in the container's status; here the
			// log is where a developer looks first.
			msg, _ := json.Marshal(map[string]string{"level": "error", "source": "sless",
				"msg": fmt.Sprintf("OOMKilled: process %d of revision %s exceeded its memory limit (%s) and was killed",
					cmd.Process.Pid, inst.revision, memoryOf(inst.limits))})
			_, _ = out.Write(append(msg, '\n'))
		}
		closeOut()
		s.procMu.Lock()
		delete(s.procs, inst)
		s.procMu.Unlock()
		vols.remove()
		inst.code, inst.oomKilled = exitCode(cmd.ProcessState), exit.OOMKilled
		inst.mu.Lock()
		reason, up := inst.reason, inst.up
		inst.mu.Unlock()
		switch {
		case reason != "":
			s.logf(slog.LevelInfo, "process stopped", s.opts.Kind, inst.fn, "revision", inst.revision, "pid", cmd.Process.Pid, "reason", reason)
		case up.IsZero():
			// A healthy instance's exit is a crash, which watch tells.
			args := []any{s.opts.Kind, inst.fn, "revision", inst.revision, "pid", cmd.Process.Pid, "status", cmd.ProcessState.String()}
			if exit.OOMKilled {
				args = append(args, "reason", ReasonOOMKilled, "limit", memoryOf(inst.limits))
			}
			s.logf(slog.LevelWarn, "process exited", args...)
		}
		close(inst.exited)
	}()
	if err := inst.waitHealthy(s.opts.StartTimeout); err != nil {
		exited := false
		select {
		case <-inst.exited:
			exited = true
		default:
		}
		inst.because("not healthy")
		inst.stop(0, 0)
		if strings.Contains(inst.logs.String(), "in use") {
			return nil, fmt.Errorf("%w: %v", errPortTaken, err)
		}
		if exited {
			if inst.oomKilled {
				err = fmt.Errorf("OOMKilled: the process exceeded its memory limit (%s) and was killed: %w", memoryOf(inst.limits), err)
			}
			return nil, &exitError{code: inst.code, oom: inst.oomKilled, output: lastMessage(inst.logs.String()), err: err}
		}
		return nil, err
	}
	inst.mu.Lock()
	inst.up = time.Now()
	inst.mu.Unlock()
	s.logf(slog.LevelInfo, "process started", s.opts.Kind, inst.fn, "revision", r.name, "pid", cmd.Process.Pid,
		"took", time.Since(began).Round(time.Millisecond))
	return inst, nil
}

// exitCode is a process's exit code as a container runtime reports it:
// 128+signal when a signal ended it.
func exitCode(ps *os.ProcessState) int {
	if ps == nil {
		return -1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

func (s *Server) logf(level slog.Level, msg string, args ...any) {
	if s.opts.Logger != nil {
		s.opts.Logger.Log(context.Background(), level, msg, args...)
	}
}

var healthClient = &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// waitHealthy polls the health path, quickly at first (cold starts are
// tens of milliseconds), until it answers 200, the process exits or the
// timeout passes.
func (inst *instance) waitHealthy(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	health := inst.url.String() + runtimes.HealthPath
	wait := time.Millisecond
	for {
		resp, err := healthClient.Get(health)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-inst.exited:
			return fmt.Errorf("the process exited (%v) before it was healthy: %s", inst.cmd.ProcessState, proc.LastLines(inst.logs.String(), 5))
		case <-time.After(wait):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no healthy answer on %s within %s: %s", runtimes.HealthPath, timeout, proc.LastLines(inst.logs.String(), 5))
		}
		wait = min(wait*2, 20*time.Millisecond)
	}
}

// stop sends SIGTERM after grace and waits for the wrapper to drain (its
// in-flight calls get up to timeout plus a second), then kills what is left.
func (inst *instance) stop(grace, timeout time.Duration) {
	if grace > 0 {
		select {
		case <-time.After(grace):
		case <-inst.exited:
			return
		}
	}
	_ = inst.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-inst.exited:
	case <-time.After(timeout + 5*time.Second):
		inst.p.Kill()
		<-inst.exited
	}
}

// Output is where a function's process (or a job of it) writes: its log file (each line
// stamped with its time, see logs.Stamper; rotated by size, see logFile)
// and the console. The returned func ends this
// process's use of them; calling it again does nothing.
func (s *Server) Output(key types.NamespacedName) (io.Writer, func()) {
	var ws []io.Writer
	release := func() {}
	if s.opts.LogDir != "" {
		p := filepath.Join(s.opts.LogDir, key.Namespace, key.Name+".log")
		s.logMu.Lock()
		lf := s.logs[p]
		if lf == nil {
			lf = newLogFile(p, s.opts.LogMaxBytes, s.opts.LogMaxFiles)
			s.logs[p] = lf
		}
		lf.refs++
		s.logMu.Unlock()
		// Each process stamps its own lines, so that two writing at once
		// (a draining revision and the new one) never mix within a line.
		stamped := &logs.Stamper{W: lf}
		ws = append(ws, stamped)
		var once sync.Once
		release = func() {
			once.Do(func() {
				stamped.Flush()
				s.logMu.Lock()
				defer s.logMu.Unlock()
				// The file stays known (its size and rotation are the
				// function's); only its descriptor is closed while no
				// process writes.
				if lf.refs--; lf.refs == 0 {
					_ = lf.Close()
				}
			})
		}
	}
	if s.opts.Console != nil {
		prefix := "[" + key.Namespace + "/" + key.Name + "] "
		if s.opts.Kind == "service" {
			prefix = "[svc:" + key.Namespace + "/" + key.Name + "] "
		}
		ws = append(ws, &prefixWriter{w: s.opts.Console, prefix: prefix})
	}
	return io.MultiWriter(ws...), release
}

// prefixWriter writes whole lines with a prefix.
type prefixWriter struct {
	mu     sync.Mutex
	w      io.Writer
	prefix string
	buf    []byte
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.buf = append(p.buf, b...)
	for {
		i := strings.IndexByte(string(p.buf), '\n')
		if i < 0 {
			break
		}
		_, _ = io.WriteString(p.w, p.prefix+string(p.buf[:i+1]))
		p.buf = p.buf[i+1:]
	}
	return len(b), nil
}

// lastMessage is the last line of a process's output, or its msg when the
// wrapper wrote it as a JSON log record (as it does the app's console).
func lastMessage(out string) string {
	line := proc.LastLines(out, 1)
	var rec struct {
		Msg string `json:"msg"`
	}
	if strings.HasPrefix(line, "{") && json.Unmarshal([]byte(line), &rec) == nil && rec.Msg != "" {
		return rec.Msg
	}
	return line
}

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
