package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/client"
	"github.com/sless-dev/sless/pkg/source"
)

func init() {
	register("deploy", "upload a folder as a function's or service's code, create or update it, wait until it is Ready", func(ctx context.Context, args []string) error {
		return runDeploy(ctx, os.Stdout, os.Stderr, os.Getenv, args)
	})
}

const (
	manifestName = source.ManifestFile
	ignoreFile   = source.IgnoreFile
)

const deploySynopsis = `sless deploy [DIR] [-n NAMESPACE] [--name N] [--runtime R] [--entrypoint E] [--service] [--no-wait]

Zip DIR (default .), leaving out .git, __pycache__, node_modules, .venv and
the patterns of DIR/.slessignore; upload it; create the function or update
its code; wait until it is Ready, showing its phase, and print its URL.
DIR/sless.yaml names the function (name, runtime, entrypoint; optional
memoryMB, timeoutSeconds, env, and secretEnv: NAME: SECRET/KEY for a value
of a secret made with sless secret create); flags override it.
With kind: service in sless.yaml, or --service, DIR is a SlessService, a
long-running web app (docs/services.md), which may also set minScale,
maxScale and containerConcurrency; its URL is the /svc/ one.`

// manifest is sless.yaml.
type manifest struct {
	// Kind is function (the default) or service.
	Kind           string            `json:"kind,omitempty"`
	Name           string            `json:"name"`
	Runtime        string            `json:"runtime"`
	Entrypoint     string            `json:"entrypoint"`
	MemoryMB       *int32            `json:"memoryMB,omitempty"`
	TimeoutSeconds *int32            `json:"timeoutSeconds,omitempty"`
	Env            map[string]string `json:"env,omitempty"`
	// SecretEnv maps a variable to SECRET/KEY, a value of a secret.
	SecretEnv map[string]string `json:"secretEnv,omitempty"`
	// A service's scale, refused for a function.
	MinScale             *int32 `json:"minScale,omitempty"`
	MaxScale             *int32 `json:"maxScale,omitempty"`
	ContainerConcurrency *int64 `json:"containerConcurrency,omitempty"`
}

const (
	kindFunction = "function"
	kindService  = "service"
)

// kind is the manifest's kind with the default filled in.
func (m manifest) kind() string {
	if m.Kind == "" {
		return kindFunction
	}
	return m.Kind
}

type deployOptions struct {
	dir     string
	ns      string
	m       manifest
	wait    bool
	timeout time.Duration
}

func parseDeploy(args []string) (deployOptions, error) {
	fs := newFlags("deploy", deploySynopsis)
	var ns string
	fs.StringVar(&ns, "n", "", "namespace (default: the login's)")
	fs.StringVar(&ns, "namespace", "", "namespace (default: the login's)")
	name := fs.String("name", "", "function name (default: sless.yaml's name)")
	rt := fs.String("runtime", "", "runtime: python3.12, nodejs22 or go1.24 (default: sless.yaml's)")
	ep := fs.String("entrypoint", "", "handler, e.g. main.handler (default: sless.yaml's)")
	svc := fs.Bool("service", false, "deploy a service (SlessService), as kind: service in sless.yaml does")
	noWait := fs.Bool("no-wait", false, "do not wait for Ready")
	timeout := fs.Duration("timeout", 10*time.Minute, "how long to wait for Ready")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return deployOptions{}, err
	}
	if len(pos) > 1 {
		return deployOptions{}, fmt.Errorf("one DIR, got %q", pos)
	}
	o := deployOptions{dir: ".", ns: ns, wait: !*noWait, timeout: *timeout}
	if len(pos) == 1 {
		o.dir = pos[0]
	}
	if *timeout <= 0 {
		return deployOptions{}, errors.New("--timeout must be positive")
	}
	st, err := os.Stat(o.dir)
	if err != nil {
		return deployOptions{}, fmt.Errorf("DIR: %w", err)
	}
	if !st.IsDir() {
		return deployOptions{}, fmt.Errorf("DIR %s is not a folder", o.dir)
	}
	b, err := os.ReadFile(filepath.Join(o.dir, manifestName))
	switch {
	case err == nil:
		if err := yaml.UnmarshalStrict(b, &o.m); err != nil {
			return deployOptions{}, fmt.Errorf("%s: %w", filepath.Join(o.dir, manifestName), err)
		}
	case !errors.Is(err, os.ErrNotExist):
		return deployOptions{}, err
	}
	for p, v := range map[*string]string{&o.m.Name: *name, &o.m.Runtime: *rt, &o.m.Entrypoint: *ep} {
		if v != "" {
			*p = v
		}
	}
	if *svc {
		o.m.Kind = kindService
	}
	var errs []error
	kind := o.m.kind()
	if kind != kindFunction && kind != kindService {
		errs = append(errs, fmt.Errorf("kind %q in %s: want function or service", o.m.Kind, manifestName))
	}
	switch {
	case o.m.Name == "":
		errs = append(errs, fmt.Errorf("no %s name: give --name or write name: in %s (sless new makes one)", kind, filepath.Join(o.dir, manifestName)))
	case kind == kindService:
		// A service's name is a DNS-1035 label of at most 52 characters,
		// as the CRD says, so that its Knative Service's hosts fit.
		if msgs := validation.IsDNS1035Label(o.m.Name); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("name %q: %s", o.m.Name, strings.Join(msgs, "; ")))
		} else if len(o.m.Name) > 52 {
			errs = append(errs, fmt.Errorf("name %q: a service's name must be at most 52 characters", o.m.Name))
		}
	default:
		if msgs := validation.IsDNS1123Label(o.m.Name); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("name %q: %s", o.m.Name, strings.Join(msgs, "; ")))
		}
	}
	errs = append(errs, o.m.checkScale()...)
	if o.m.Runtime == "" {
		errs = append(errs, errors.New("no runtime: give --runtime or write runtime: in "+manifestName))
	}
	if o.m.Entrypoint == "" {
		errs = append(errs, errors.New("no entrypoint: give --entrypoint or write entrypoint: in "+manifestName))
	}
	for _, k := range slices.Sorted(maps.Keys(o.m.SecretEnv)) {
		if _, ok := o.m.Env[k]; ok {
			errs = append(errs, fmt.Errorf("%s is in both env and secretEnv of %s", k, manifestName))
		}
		if _, _, ok := secretRef(o.m.SecretEnv[k]); !ok {
			errs = append(errs, fmt.Errorf("secretEnv %s: %q is not SECRET/KEY (e.g. db/password)", k, o.m.SecretEnv[k]))
		}
	}
	if len(errs) > 0 {
		return deployOptions{}, errors.Join(errs...)
	}
	return o, nil
}

// checkScale refuses a service's scale on a function and bounds it as the
// SlessService CRD does, so a mistake is told before the upload.
func (m manifest) checkScale() []error {
	var errs []error
	if m.kind() != kindService {
		for k, set := range map[string]bool{"minScale": m.MinScale != nil, "maxScale": m.MaxScale != nil, "containerConcurrency": m.ContainerConcurrency != nil} {
			if set {
				errs = append(errs, fmt.Errorf("%s in %s is for a service: write kind: service or give --service", k, manifestName))
			}
		}
		slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
		return errs
	}
	if v := m.MinScale; v != nil && (*v < 0 || *v > slessv1alpha1.MaxScale) {
		errs = append(errs, fmt.Errorf("minScale %d: want 0 to %d", *v, slessv1alpha1.MaxScale))
	}
	if v := m.MaxScale; v != nil && (*v < 1 || *v > slessv1alpha1.MaxScale) {
		errs = append(errs, fmt.Errorf("maxScale %d: want 1 to %d", *v, slessv1alpha1.MaxScale))
	}
	if m.MinScale != nil && m.MaxScale != nil && *m.MaxScale < *m.MinScale {
		errs = append(errs, fmt.Errorf("maxScale %d is below minScale %d", *m.MaxScale, *m.MinScale))
	}
	if v := m.ContainerConcurrency; v != nil && (*v < 0 || *v > 1000) {
		errs = append(errs, fmt.Errorf("containerConcurrency %d: want 0 (no limit) to 1000", *v))
	}
	return errs
}

// secretRef splits SECRET/KEY.
func secretRef(s string) (secret, key string, ok bool) {
	secret, key, ok = strings.Cut(s, "/")
	return secret, key, ok && secret != "" && key != "" && !strings.Contains(key, "/")
}

func runDeploy(ctx context.Context, stdout, stderr io.Writer, getenv func(string) string, args []string) error {
	o, err := parseDeploy(args)
	if err != nil {
		return err
	}
	s, err := connect(ctx, getenv, o.ns)
	if err != nil {
		return err
	}
	packed, err := source.PackDir(o.dir)
	if err != nil {
		return err
	}
	zipped := packed.Zip
	fmt.Fprintf(stderr, "Uploading %s (%d files, %s) as %s/%s ...\n", o.dir, packed.Files, humanBytes(len(zipped)), s.ns, o.m.Name)
	kind := o.m.kind()
	deploy, get := deployFunction, func(ctx context.Context) (workload, error) {
		fn, err := s.api.GetFunction(ctx, s.ns, o.m.Name)
		if err != nil {
			return nil, err
		}
		return fn, nil
	}
	if kind == kindService {
		deploy, get = deployService, func(ctx context.Context) (workload, error) {
			svc, err := s.api.GetService(ctx, s.ns, o.m.Name)
			if err != nil {
				return nil, err
			}
			return svc, nil
		}
	}
	w, err := deploy(ctx, stderr, s, o.m, zipped)
	if err != nil {
		return err
	}
	if !o.wait {
		fmt.Fprintf(stdout, "%s\n", w.WorkloadStatus().URL)
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	w, err = waitReady(wctx, kind, o.m.Name, get, newProgress(stderr))
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			see := "sless describe " + o.m.Name
			if kind == kindService {
				see = "sless services and sless logs --service " + o.m.Name
			}
			return fmt.Errorf("not Ready after %v; see %s", o.timeout, see)
		}
		return err
	}
	fmt.Fprintf(stdout, "%s\n", w.WorkloadStatus().URL)
	return nil
}

// workload is what deploy waits on: a Function or a SlessService, which
// share their status and its readings.
type workload interface {
	GetGeneration() int64
	WorkloadStatus() *slessv1alpha1.FunctionStatus
	IsReady() bool
	Failure() (reason, message string, failed bool)
}

// deployFunction uploads the code and creates the Function or brings its
// settings to the manifest's.
func deployFunction(ctx context.Context, stderr io.Writer, s *session, m manifest, zipped []byte) (workload, error) {
	up, err := s.api.PutSource(ctx, s.ns, m.Name, zipped, client.WithRuntime(m.Runtime), client.WithEntrypoint(m.Entrypoint))
	if err != nil {
		return nil, err
	}
	fn := up.Function
	if fn == nil {
		// The upload stored the archive; the Function is made with it.
		fn, err = s.api.CreateFunction(ctx, &slessv1alpha1.Function{
			ObjectMeta: metav1.ObjectMeta{Name: m.Name, Namespace: s.ns},
			Spec:       m.spec(slessv1alpha1.FunctionSource{Archive: &up.Archive}),
		})
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(stderr, "Created function %s.\n", m.Name)
		return fn, nil
	}
	if p := m.patch(&fn.Spec); p != nil {
		if fn, err = s.api.PatchFunction(ctx, s.ns, m.Name, p); err != nil {
			return nil, err
		}
	}
	reportUpdate(stderr, "function", m.Name, up.Changed)
	return fn, nil
}

// deployService is deployFunction for a SlessService.
func deployService(ctx context.Context, stderr io.Writer, s *session, m manifest, zipped []byte) (workload, error) {
	up, err := s.api.PutServiceSource(ctx, s.ns, m.Name, zipped, client.WithRuntime(m.Runtime), client.WithEntrypoint(m.Entrypoint))
	if err != nil {
		return nil, err
	}
	svc := up.Service
	if svc == nil {
		svc, err = s.api.CreateService(ctx, &slessv1alpha1.SlessService{
			ObjectMeta: metav1.ObjectMeta{Name: m.Name, Namespace: s.ns},
			Spec:       m.serviceSpec(slessv1alpha1.FunctionSource{Archive: &up.Archive}),
		})
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(stderr, "Created service %s.\n", m.Name)
		return svc, nil
	}
	if p := m.patch(svc.BuildSpec()); p != nil {
		if svc, err = s.api.PatchService(ctx, s.ns, m.Name, p); err != nil {
			return nil, err
		}
	}
	reportUpdate(stderr, "service", m.Name, up.Changed)
	return svc, nil
}

func reportUpdate(w io.Writer, kind, name string, changed bool) {
	if changed {
		fmt.Fprintf(w, "Updated %s %s.\n", kind, name)
	} else {
		fmt.Fprintf(w, "%s%s %s already has this code.\n", strings.ToUpper(kind[:1]), kind[1:], name)
	}
}

// serviceSpec is the SlessService the manifest describes, with the given source.
func (m manifest) serviceSpec(src slessv1alpha1.FunctionSource) slessv1alpha1.SlessServiceSpec {
	return slessv1alpha1.SlessServiceSpec{
		WorkloadSpec: slessv1alpha1.WorkloadSpec{
			Runtime:    m.Runtime,
			Entrypoint: m.Entrypoint,
			Source:     src,
			MemoryMB:   m.MemoryMB,
			Env:        m.envVars(),
		},
		TimeoutSeconds:       m.TimeoutSeconds,
		MinScale:             m.MinScale,
		MaxScale:             m.MaxScale,
		ContainerConcurrency: m.ContainerConcurrency,
	}
}

// spec is the Function the manifest describes, with the given source.
func (m manifest) spec(src slessv1alpha1.FunctionSource) slessv1alpha1.FunctionSpec {
	return slessv1alpha1.FunctionSpec{
		WorkloadSpec: slessv1alpha1.WorkloadSpec{
			Runtime:    m.Runtime,
			Entrypoint: m.Entrypoint,
			Source:     src,
			MemoryMB:   m.MemoryMB,
			Env:        m.envVars(),
		},
		TimeoutSeconds: m.TimeoutSeconds,
	}
}

func (m manifest) envVars() []slessv1alpha1.EnvVar {
	var env []slessv1alpha1.EnvVar
	for _, k := range slices.Sorted(maps.Keys(m.Env)) {
		env = append(env, slessv1alpha1.EnvVar{Name: k, Value: m.Env[k]})
	}
	for _, k := range slices.Sorted(maps.Keys(m.SecretEnv)) {
		secret, key, _ := secretRef(m.SecretEnv[k])
		env = append(env, slessv1alpha1.EnvVar{Name: k, ValueFrom: &corev1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: key}}})
	}
	return env
}

// patch is the merge patch that brings a Function's spec, or a service's
// BuildSpec, to the manifest's settings besides the code (the upload set
// those), or nil when it has them.
func (m manifest) patch(cur *slessv1alpha1.FunctionSpec) map[string]any {
	spec := map[string]any{}
	if differs(m.MemoryMB, cur.MemoryMB) {
		spec["memoryMB"] = *m.MemoryMB
	}
	if differs(m.TimeoutSeconds, cur.TimeoutSeconds) {
		spec["timeoutSeconds"] = *m.TimeoutSeconds
	}
	if m.Env != nil || m.SecretEnv != nil {
		want := m.envVars()
		if !equality.Semantic.DeepEqual(want, cur.Env) {
			spec["env"] = want
		}
	}
	// Only a service's manifest has these (checkScale); a SlessService's
	// BuildSpec carries them in Scale, its spec at the top.
	var scale slessv1alpha1.ScaleSpec
	if cur.Scale != nil {
		scale = *cur.Scale
	}
	if differs(m.MinScale, scale.Min) {
		spec["minScale"] = *m.MinScale
	}
	if differs(m.MaxScale, scale.Max) {
		spec["maxScale"] = *m.MaxScale
	}
	if differs(m.ContainerConcurrency, scale.ContainerConcurrency) {
		spec["containerConcurrency"] = *m.ContainerConcurrency
	}
	if len(spec) == 0 {
		return nil
	}
	return map[string]any{"spec": spec}
}

// differs says whether the manifest sets want and cur is not it.
func differs[T comparable](want, cur *T) bool {
	return want != nil && (cur == nil || *cur != *want)
}

// waitReady polls the workload until its current generation is Ready
// (with a URL) or Failed, reporting each new state to progress.
func waitReady(ctx context.Context, kind, name string, get func(context.Context) (workload, error), progress func(workload)) (workload, error) {
	tick := time.NewTicker(400 * time.Millisecond)
	defer tick.Stop()
	for {
		w, err := get(ctx)
		if err != nil {
			return nil, err
		}
		progress(w)
		if w.IsReady() && w.WorkloadStatus().URL != "" {
			progress(nil)
			return w, nil
		}
		if reason, msg, failed := w.Failure(); failed {
			progress(nil)
			return nil, fmt.Errorf("%s %s failed (%s): %s", kind, name, reason, msg)
		}
		select {
		case <-ctx.Done():
			progress(nil)
			return nil, ctx.Err()
		case <-tick.C:
		}
	}
}

// newProgress returns a reporter of a workload's state: on a terminal one
// line rewritten in place, otherwise a line per change. nil ends the line.
func newProgress(w io.Writer) func(workload) {
	tty := isTerminal(w)
	last := ""
	start := time.Now()
	return func(wl workload) {
		if wl == nil {
			if tty && last != "" {
				fmt.Fprintln(w)
			}
			return
		}
		line := stateLine(wl)
		if tty {
			fmt.Fprintf(w, "\r\033[K%s (%ds)", line, int(time.Since(start).Seconds()))
		} else if line != last {
			fmt.Fprintln(w, line)
		}
		last = line
	}
}

// stateLine is "Building  SourceReady ✓  BuildSucceeded …  ServiceReady …: message".
func stateLine(w workload) string {
	st := w.WorkloadStatus()
	phase := string(st.Phase)
	if phase == "" || st.ObservedGeneration != w.GetGeneration() {
		phase = "Pending"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-9s", phase)
	var msg string
	for _, t := range []string{"SourceReady", "BuildSucceeded", "ServiceReady"} {
		mark := "…"
		if c := meta.FindStatusCondition(st.Conditions, t); c != nil {
			switch c.Status {
			case metav1.ConditionTrue:
				mark = "✓"
			case metav1.ConditionFalse:
				mark = "✗"
				if msg == "" {
					msg = c.Message
				}
			}
		}
		fmt.Fprintf(&b, "  %s %s", t, mark)
	}
	if msg == "" {
		if c := meta.FindStatusCondition(st.Conditions, "Ready"); c != nil && c.Status != metav1.ConditionTrue {
			msg = c.Message
		}
	}
	if msg != "" {
		if len(msg) > 100 {
			msg = msg[:100] + "…"
		}
		b.WriteString(": " + msg)
	}
	return b.String()
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func humanBytes(n int) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
