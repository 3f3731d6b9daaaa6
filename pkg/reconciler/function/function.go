// Package function reconciles Functions: source → build context in object
// storage → image built by an adapter.Builder → service run by an
// adapter.Server → status. The decisions are written once, against the
// adapter interfaces, so the cluster (Tekton, Knative, S3) and local mode
// (`sless dev`) share them; controller.go wires the cluster adapters.
package function

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"

	"go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/sless-dev/sless/pkg/adapter"
	"github.com/sless-dev/sless/pkg/adapter/s3"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/names"
	"github.com/sless-dev/sless/pkg/source"
)

// Config is what the reconciler needs beyond its adapters.
type Config struct {
	// PublicBaseURL is where the invoke proxy is reached from outside, e.g.
	// https://sless.example.com; status.url is <PublicBaseURL>/fn/<ns>/<name>
	// unless FunctionDomain is set.
	PublicBaseURL string
	// FunctionDomain, when set, is the domain the invoke proxy serves each
	// function under (its Options.Domain): status.url is then the
	// function's own host, {name}.{ns}.{FunctionDomain}, with the scheme
	// and port of PublicBaseURL.
	FunctionDomain string
	// ZipLimits bound uploaded archives (source.DefaultLimits when zero).
	ZipLimits source.Limits
}

// URL is the public URL of w: a function's invoke URL, or a service's
// ServiceURL.
func (c Config) URL(w slessv1alpha1.Workload) string {
	if w.WorkloadKind() == slessv1alpha1.KindSlessService {
		return c.ServiceURL(w.GetNamespace(), w.GetName())
	}
	return c.InvokeURL(w.GetNamespace(), w.GetName())
}

// ServiceURL is the public URL of a SlessService: the invoke proxy serves
// it under /svc/{ns}/{name}/, passing the rest of the path through.
func (c Config) ServiceURL(namespace, name string) string {
	return strings.TrimSuffix(c.PublicBaseURL, "/") + "/svc/" + namespace + "/" + name + "/"
}

// InvokeURL is the public URL of a function.
func (c Config) InvokeURL(namespace, name string) string {
	if c.FunctionDomain != "" {
		if u, err := url.Parse(c.PublicBaseURL); err == nil && u.Host != "" {
			host := name + "." + namespace + "." + c.FunctionDomain // as invoke.FunctionHost
			if port := u.Port(); port != "" {
				host = net.JoinHostPort(host, port)
			}
			return u.Scheme + "://" + host
		}
	}
	return strings.TrimSuffix(c.PublicBaseURL, "/") + "/fn/" + namespace + "/" + name
}

// TagURL is the public URL of w's traffic target tag: the host
// {tag}-{name}.{ns}.{FunctionDomain} of a function when the proxy serves
// hosts, else the path of w's URL with @tag after the name.
func (c Config) TagURL(w slessv1alpha1.Workload, tag string) string {
	ns, name := w.GetNamespace(), w.GetName()
	if w.WorkloadKind() == slessv1alpha1.KindSlessService {
		return strings.TrimSuffix(c.PublicBaseURL, "/") + "/svc/" + ns + "/" + name + "@" + tag + "/"
	}
	if c.FunctionDomain != "" {
		if u, err := url.Parse(c.PublicBaseURL); err == nil && u.Host != "" {
			return c.InvokeURL(ns, tag+"-"+name)
		}
	}
	return c.InvokeURL(ns, name) + "@" + tag
}

// Reconciler makes a Function's world match its spec.
type Reconciler struct {
	Client  client.Client
	Builder adapter.Builder
	Server  adapter.Server
	// Store holds uploaded archives and build contexts.
	Store  s3.Store
	Config Config
	// BuildFinished, when set, is told of every build the reconciler sees
	// end, once per build and Function: when the status telling that end
	// is stored. The controller feeds a histogram.
	BuildFinished func(adapter.BuildState)
	// TracerProvider, when set, makes spans of each finished build
	// (trace.go); nil makes none.
	TracerProvider trace.TracerProvider
	// Recorder records the Events of events.go on Functions; nil records
	// none, as in local mode, which has no Event API to record to.
	Recorder events.EventRecorder

	// NewObject makes an empty object of the kind reconciled; nil means a
	// Function. The SlessService controller (pkg/reconciler/service) sets it.
	NewObject func() slessv1alpha1.Workload

	mu sync.Mutex
	// contexts remembers, per Function UID, the build context stored for
	// one generation, so that a reconcile of an unchanged spec neither
	// rebuilds the tar.gz nor asks object storage again.
	contexts map[types.UID]storedContext
	// written remembers, per Function UID, the Function as this
	// reconciler last wrote it and the versions those writes replaced.
	written map[types.UID]ownWrite
}

// ownWrite is a Function as the reconciler's last writes left it, and the
// resourceVersions they replaced: a cached Function at one of those is
// known to be older than obj.
type ownWrite struct {
	obj      slessv1alpha1.Workload
	replaced []string
}

type storedContext struct {
	generation int64
	input      adapter.BuildInput
}

var _ reconcile.Reconciler = (*Reconciler)(nil)

func (r *Reconciler) newObject() slessv1alpha1.Workload {
	if r.NewObject != nil {
		return r.NewObject()
	}
	return &slessv1alpha1.Function{}
}

// BuildCanceller is a Builder that can stop builds the Function no longer
// asks for. On a cluster each superseded PipelineRun would otherwise keep a
// kaniko pod busy to its end: three quick edits were three builds at once,
// two of them of code no one will serve.
type BuildCanceller interface {
	// CancelBuilds cancels fn's unfinished builds of any other digest than
	// keep ("" keeps none) and names those it cancelled; finished builds
	// are not touched. EnsureBuild builds a cancelled digest again when it
	// is asked for once more.
	CancelBuilds(ctx context.Context, fn slessv1alpha1.Workload, keep string) ([]string, error)
}

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	fn := r.newObject()
	if err := r.Client.Get(ctx, req.NamespacedName, fn); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	fn = r.fresher(fn)
	res, err := r.reconcileFunction(ctx, fn)
	if err != nil {
		// What a retry may fix is told on the Function too, as Knative's
		// reconcilers do, not only in the controller's log; repeats of one
		// error become one Event's series.
		r.record(fn, event{typ: corev1.EventTypeWarning, reason: EventInternalError, action: actionReconcile, note: err.Error()})
	}
	return res, err
}

func (r *Reconciler) reconcileFunction(ctx context.Context, fn slessv1alpha1.Workload) (reconcile.Result, error) {
	if !fn.GetDeletionTimestamp().IsZero() {
		return reconcile.Result{}, r.finalize(ctx, fn)
	}
	if !controllerutil.ContainsFinalizer(fn, names.Finalizer) {
		// The finalizer goes on before anything is stored, so no object
		// in storage can outlive the Function.
		controllerutil.AddFinalizer(fn, names.Finalizer)
		prev := fn.GetResourceVersion()
		if err := r.Client.Update(ctx, fn); err != nil {
			r.forgetUID(fn.GetUID())
			return reconcile.Result{}, err
		}
		r.wrote(fn, prev)
	}

	before := fn.WorkloadStatus().DeepCopy()
	var evs []event
	err := r.reconcile(ctx, fn, &evs)
	evs = append(evs, becameReady(before, fn.WorkloadStatus())...)
	if !equality.Semantic.DeepEqual(before, fn.WorkloadStatus()) {
		prev := fn.GetResourceVersion()
		if uerr := r.Client.Status().Update(ctx, fn); uerr != nil {
			r.forgetUID(fn.GetUID())
			// The steps were taken whatever became of the write. The
			// transitions were not stored: the next reconcile finds them
			// again and tells them then, so each is told once.
			r.record(fn, steps(evs)...)
			if apierrors.IsConflict(uerr) {
				// Someone wrote the Function since we read it; the watch
				// brings the new version.
				return reconcile.Result{Requeue: true}, nil
			}
			return reconcile.Result{}, errors.Join(err, uerr)
		}
		r.wrote(fn, prev)
	}
	r.tell(ctx, fn, evs)
	return reconcile.Result{}, err
}

// fresher is fn, or the Function as this reconciler last wrote it when fn
// comes from a cache that has not yet seen those writes. An event of a
// PipelineRun or Service often reconciles a Function just after its status
// was written; reconciled from the cache's older copy, the status looked
// changed and its write was refused as a conflict, a request and a requeue
// wasted. A write by anyone else since still conflicts, as it should.
func (r *Reconciler) fresher(fn slessv1alpha1.Workload) slessv1alpha1.Workload {
	r.mu.Lock()
	defer r.mu.Unlock()
	w, ok := r.written[fn.GetUID()]
	if !ok {
		return fn
	}
	if slices.Contains(w.replaced, fn.GetResourceVersion()) {
		return w.obj.DeepCopyObject().(slessv1alpha1.Workload)
	}
	// The cache has caught up with the writes, or gone past them.
	delete(r.written, fn.GetUID())
	return fn
}

// wrote records fn as a write of this reconciler left it, the write
// having replaced version prev.
func (r *Reconciler) wrote(fn slessv1alpha1.Workload, prev string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.written == nil {
		r.written = map[types.UID]ownWrite{}
	}
	// The cache may still hold any version these writes replaced since it
	// last caught up.
	w := r.written[fn.GetUID()]
	r.written[fn.GetUID()] = ownWrite{obj: fn.DeepCopyObject().(slessv1alpha1.Workload), replaced: append(slices.Clone(w.replaced), prev)}
}

// forgetUID drops what wrote kept: the Function in hand no longer matches
// any version stored (a write of its status failed), or it is gone.
func (r *Reconciler) forgetUID(uid types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.written, uid)
}

// forget drops what remember kept of a Function that is gone.
func (r *Reconciler) forget(key types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for uid, w := range r.written {
		if w.obj.GetNamespace() == key.Namespace && w.obj.GetName() == key.Name {
			delete(r.written, uid)
		}
	}
}

// reconcile moves the Function along source → build → serve and records
// each step as a condition. An error is returned only for what a retry may
// fix (storage or API unavailable); a refusal (bad source, failed build) is
// a condition and waits for the spec to change. The Events to tell of the
// steps taken and transitions seen are appended to evs, in order.
func (r *Reconciler) reconcile(ctx context.Context, fn slessv1alpha1.Workload, evs *[]event) error {
	// Build and serve from the defaulted spec, as the apiserver stores it,
	// whatever store the Function came from; the status found is copied back.
	work := fn.DeepCopyObject().(slessv1alpha1.Workload)
	work.SetDefaults()
	orig := fn
	defer func() { *orig.WorkloadStatus() = *work.WorkloadStatus() }()
	fn = work
	st := fn.WorkloadStatus()
	st.ObservedGeneration = fn.GetGeneration()

	image, err := r.image(ctx, fn, evs)
	// Once the spec's build is known, builds of earlier specs are stopped.
	// A failure to stop them holds nothing up: it is returned, and retried,
	// with whatever else this reconcile did.
	cerr := r.cancelSuperseded(ctx, fn, evs)
	if err != nil || image == "" {
		st.MarkServiceAwaitingImage()
		if err != nil {
			return errors.Join(err, cerr)
		}
		// Building, or the build failed: the service is left as it is, but
		// a revision asked for before may become ready meanwhile, and then
		// it is what calls reach and runs execute.
		return errors.Join(r.observeServing(ctx, fn), cerr)
	}

	// The build succeeded (or none was needed): point the service at the
	// image. Until its new revision is ready Knative keeps the old one
	// serving, so status.image may name an image not yet serving; Ready
	// tells the two apart.
	ss, err := r.Server.EnsureService(ctx, fn, image)
	if err != nil {
		if adapter.Rejected(err) {
			st.MarkServiceRejected(err.Error())
		} else {
			st.MarkServiceError(err.Error())
		}
		return errors.Join(err, cerr)
	}
	switch {
	case ss.Created:
		*evs = append(*evs, step(EventServiceCreated, actionServe,
			"created service %s with revision %s of image %s", names.Service(fn), ss.Revision, image))
	case ss.Updated:
		*evs = append(*evs, step(EventServiceUpdated, actionServe,
			"updated service %s to revision %s of image %s", names.Service(fn), ss.Revision, image))
	}
	st.Image = ss.Image
	r.copyServing(fn, ss)
	switch {
	case ss.Ready:
		st.MarkServiceReady()
	case ss.Failed:
		st.MarkServiceFailed(ss.Reason, ss.Message)
	default:
		st.MarkServiceRolling(ss.Reason, ss.Message)
	}
	return cerr
}

// cancelSuperseded cancels the builds that fn's spec no longer asks for,
// once image has decided what it asks for: the build of its source digest
// and no other, or none for a prebuilt image or a refused source. While
// the source cannot be read (storage unavailable) nothing is decided, and
// nothing cancelled. A build already finished is never touched, so the
// image serving now is never taken away.
func (r *Reconciler) cancelSuperseded(ctx context.Context, fn slessv1alpha1.Workload, evs *[]event) error {
	c, ok := r.Builder.(BuildCanceller)
	if !ok {
		return nil
	}
	src := fn.WorkloadStatus().SourceCondition()
	if src == nil || src.ObservedGeneration != fn.GetGeneration() || src.Status == metav1.ConditionUnknown {
		return nil
	}
	keep := ""
	if src.Status == metav1.ConditionTrue && fn.BuildSpec().Source.Image == "" {
		keep = fn.WorkloadStatus().SourceDigest
	}
	cancelled, err := c.CancelBuilds(ctx, fn, keep)
	for _, name := range cancelled {
		*evs = append(*evs, step(EventBuildCancelled, actionBuild,
			"cancelled build %s: superseded by generation %d of the Function", name, fn.GetGeneration()))
	}
	return err
}

// observeServing copies what serves fn now into its status, without
// touching the service or its condition, which are the current
// generation's.
func (r *Reconciler) observeServing(ctx context.Context, fn slessv1alpha1.Workload) error {
	ss, found, err := r.Server.Observe(ctx, fn)
	if err != nil || !found {
		return err
	}
	r.copyServing(fn, ss)
	return nil
}

// copyServing writes the revisions, the serving image and the addresses
// of ss into fn's status.
func (r *Reconciler) copyServing(fn slessv1alpha1.Workload, ss adapter.ServeState) {
	st := fn.WorkloadStatus()
	st.LatestCreatedRevision = ss.LatestCreatedRevision
	st.LatestReadyRevision = ss.LatestReadyRevision
	st.ServingImage = ss.ServingImage
	if ss.Address != "" {
		st.Address = ss.Address
	}
	if st.LatestReadyRevision != "" {
		st.URL = r.Config.URL(fn)
	}
	st.Traffic = nil
	for _, t := range ss.Traffic {
		if t.Tag != "" {
			t.URL = r.Config.TagURL(fn, t.Tag)
		}
		st.Traffic = append(st.Traffic, t)
	}
}

// image is the image to serve: the prebuilt one, or the one the builder
// made of the source's build context. "" means not (yet) available, and
// the conditions say why. fn is the defaulted copy; its status is written.
// A build started, or its end seen for the first time, is appended to evs.
func (r *Reconciler) image(ctx context.Context, fn slessv1alpha1.Workload, evs *[]event) (string, error) {
	st := fn.WorkloadStatus()
	if img := fn.BuildSpec().Source.Image; img != "" {
		st.SourceDigest, st.BuildRef = "", ""
		st.MarkPrebuiltImage()
		return img, nil
	}

	in, err := r.buildContext(ctx, fn)
	if err != nil {
		var serr *source.Error
		if errors.As(err, &serr) {
			st.MarkSourceRefused(serr.Reason, err.Error())
			return "", nil
		}
		st.MarkSourceUnavailable(err.Error())
		return "", err
	}
	st.SourceDigest = in.Digest
	st.MarkSourceStored()

	prevRef, prevFinal := st.BuildRef, st.BuildFinished()
	bs, err := r.Builder.EnsureBuild(ctx, fn, in)
	if err != nil {
		if adapter.Rejected(err) {
			st.MarkBuildRejected(err.Error())
		} else {
			st.MarkBuildError(err.Error())
		}
		return "", err
	}
	// The status already tells this build's end: it is not told again.
	wasFinal := prevFinal && prevRef == bs.Name
	if bs.Name != "" {
		st.BuildRef = bs.Name
	}
	if bs.Created {
		*evs = append(*evs, step(EventBuildStarted, actionBuild, "started build %s of source %s", bs.Name, in.Digest))
	}
	switch {
	case !bs.Done:
		st.MarkBuilding(bs.Reason, bs.Message)
		return "", nil
	case !bs.Succeeded:
		// The service keeps its last good image; the new source is refused.
		st.MarkBuildFailed(bs.Reason, bs.Message)
	default:
		st.MarkBuildSucceeded()
	}
	if !wasFinal {
		*evs = append(*evs, buildEnded(*st.BuildCondition(), bs))
	}
	if !bs.Succeeded {
		return "", nil
	}
	return bs.Image, nil
}

// buildContext makes the function's deterministic build context and stores
// it under {ns}/{fn}/context/<hex>.tar.gz unless an equal one is there.
// Refusals of the source are *source.Error; anything else is storage.
func (r *Reconciler) buildContext(ctx context.Context, fn slessv1alpha1.Workload) (adapter.BuildInput, error) {
	r.mu.Lock()
	if c, ok := r.contexts[fn.GetUID()]; ok && c.generation == fn.GetGeneration() {
		r.mu.Unlock()
		return c.input, nil
	}
	r.mu.Unlock()

	files, modes, err := r.sourceFiles(ctx, fn)
	if err != nil {
		return adapter.BuildInput{}, err
	}
	bc, err := source.BuildContext(source.Input{Runtime: fn.BuildSpec().Runtime, Entrypoint: fn.BuildSpec().Entrypoint, Mode: fn.Mode(), Files: files, Modes: modes})
	if err != nil {
		return adapter.BuildInput{}, err
	}
	key := names.WorkloadContextKey(fn, bc.Digest)
	// The status names this very context as stored, and source GC keeps
	// what the status names: asking storage again cost every Function a
	// round trip after each restart of the controller.
	st := fn.WorkloadStatus()
	src := st.SourceCondition()
	ok := st.SourceDigest == bc.Digest && src != nil && src.Status == metav1.ConditionTrue
	if !ok {
		if ok, err = r.Store.Exists(ctx, key); err != nil {
			return adapter.BuildInput{}, fmt.Errorf("check build context %s: %w", key, err)
		}
	}
	if !ok {
		if err := r.Store.Put(ctx, key, bytes.NewReader(bc.TarGz), int64(len(bc.TarGz)), "application/gzip"); err != nil {
			return adapter.BuildInput{}, fmt.Errorf("store build context %s: %w", key, err)
		}
	}
	in := adapter.BuildInput{Digest: bc.Digest, Location: r.Store.Location(key)}
	r.mu.Lock()
	if r.contexts == nil {
		r.contexts = map[types.UID]storedContext{}
	}
	r.contexts[fn.GetUID()] = storedContext{generation: fn.GetGeneration(), input: in}
	r.mu.Unlock()
	return in, nil
}

// sourceFiles are the function's files and their modes: inline ones (which
// have no modes), or the uploaded zip, checked against the digest the
// upload recorded, with the permission bits of its entries, so that a
// script shipped executable is built executable, as the API's upload built
// the context it reported.
func (r *Reconciler) sourceFiles(ctx context.Context, fn slessv1alpha1.Workload) (source.Files, source.Modes, error) {
	src := fn.BuildSpec().Source
	switch {
	case src.Inline != nil:
		return source.Inline(src.Inline.Files), nil, nil
	case src.Archive != nil:
		a := src.Archive
		if b, ok := r.Store.(interface{ Bucket() string }); ok && b.Bucket() != a.Bucket {
			return nil, nil, &source.Error{Reason: slessv1alpha1.FunctionReasonArchiveBucket, Message: fmt.Sprintf("archive is in bucket %q, sless reads bucket %q", a.Bucket, b.Bucket())}
		}
		rc, _, err := r.Store.Get(ctx, a.Key)
		if errors.Is(err, s3.ErrNotFound) {
			return nil, nil, &source.Error{Reason: slessv1alpha1.FunctionReasonArchiveMissing, Path: a.Key, Message: "no uploaded archive under this key"}
		}
		if err != nil {
			return nil, nil, fmt.Errorf("read archive %s: %w", a.Key, err)
		}
		defer rc.Close()
		lim := r.Config.ZipLimits
		max := source.DefaultLimits.MaxCompressed
		if lim.MaxCompressed > 0 {
			max = lim.MaxCompressed
		}
		zipped, err := io.ReadAll(io.LimitReader(rc, max+1))
		if err != nil {
			return nil, nil, fmt.Errorf("read archive %s: %w", a.Key, err)
		}
		sum := sha256.Sum256(zipped)
		if got := hex.EncodeToString(sum[:]); got != a.SHA256 {
			return nil, nil, &source.Error{Reason: slessv1alpha1.FunctionReasonArchiveMismatch, Path: a.Key,
				Message: fmt.Sprintf("archive has sha256 %s, the Function names %s", got, a.SHA256)}
		}
		return source.ReadZipModes(bytes.NewReader(zipped), int64(len(zipped)), lim)
	}
	return nil, nil, &source.Error{Reason: source.ReasonEmpty, Message: "the Function has no inline files, archive or image"}
}

// finalize deletes the function's objects in storage, then lets the
// Function go. Its PipelineRuns and Knative Service carry owner references,
// so garbage collection removes them, a running build included.
func (r *Reconciler) finalize(ctx context.Context, fn slessv1alpha1.Workload) error {
	if !controllerutil.ContainsFinalizer(fn, names.Finalizer) {
		return nil
	}
	if err := r.Store.DeletePrefix(ctx, names.WorkloadPrefix(fn)); err != nil {
		err = fmt.Errorf("delete objects of %s/%s: %w", fn.GetNamespace(), fn.GetName(), err)
		// The Function stays until its objects are gone, retried with
		// backoff; a deletion that does not end must say why where
		// `kubectl get` looks, not only in the controller's log.
		before := fn.WorkloadStatus().DeepCopy()
		fn.WorkloadStatus().ObservedGeneration = fn.GetGeneration()
		fn.WorkloadStatus().MarkCleanupFailed(err.Error())
		if !equality.Semantic.DeepEqual(before, fn.WorkloadStatus()) {
			if uerr := r.Client.Status().Update(ctx, fn); uerr != nil && !apierrors.IsConflict(uerr) && !apierrors.IsNotFound(uerr) {
				return errors.Join(err, uerr)
			}
		}
		return err
	}
	r.mu.Lock()
	delete(r.contexts, fn.GetUID())
	delete(r.written, fn.GetUID())
	r.mu.Unlock()
	controllerutil.RemoveFinalizer(fn, names.Finalizer)
	return client.IgnoreNotFound(r.Client.Update(ctx, fn))
}
