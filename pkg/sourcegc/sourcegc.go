// Package sourcegc deletes the source archives and build contexts in object
// storage that no Function or SlessService needs: a zip uploaded for one
// that was never created, the uploads and contexts one has moved on from.
// (Below, "Function" stands for either: a SlessService's objects lie under
// a prefix of their own and are decided on by the same rules.)
// Deleting a Function deletes its objects (the Function reconciler's
// finalizer); this collects what is left behind while Functions live, or
// without one ever living.
//
// An object is kept while it is younger than the grace period, whatever
// refers to it: an upload for a Function not created yet is named only by
// the create that follows it. Older, it is kept while its Function needs
// it: the archive spec.source.archive names and the build context
// status.sourceDigest names (what the current generation builds, or built,
// from). While anything else may need an older object — the Function is
// being deleted (its finalizer's work), its latest generation is not
// reconciled yet, or an older generation's revision serves while the
// current one builds, deploys or failed (which upload that revision came
// from is not recorded, and a user rolling back names it again) — every
// object of that Function is kept.
package sourcegc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/sless-dev/sless/pkg/adapter/s3"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/names/blobkey"
)

// Defaults of Options.
const (
	DefaultGrace     = 24 * time.Hour
	DefaultInterval  = time.Hour
	DefaultBatchSize = 1000
	// listPage is how many objects of a kind one list request reads.
	listPage = 500
)

// Options configure a Collector.
type Options struct {
	// Store holds the objects: the S3 bucket, or local mode's directory.
	Store s3.Store
	// Objects reads Functions and SlessServices as they are now: on a
	// cluster the manager's API reader, not its cache, which may lag
	// behind a create naming an upload; in local mode the store.
	Objects client.Reader
	// Grace is how long an object is kept whatever refers to it; it must
	// outlast the time between an upload and the create that names it.
	// Default DefaultGrace.
	Grace time.Duration
	// Interval is the time between sweeps. Default DefaultInterval.
	Interval time.Duration
	// BatchSize bounds the objects decided on and deleted together, and
	// so the memory a sweep holds. Default DefaultBatchSize.
	BatchSize int
	// Metrics, when set, count deleted objects and errors.
	Metrics *Metrics
	// Logger gets one line per sweep. Default slog.Default().
	Logger *slog.Logger
	// Now is the clock ages are measured with. Default time.Now.
	Now func() time.Time
}

// Metrics are the collector's Prometheus series.
type Metrics struct {
	deleted prometheus.Counter
	errors  prometheus.Counter
	sweeps  *prometheus.CounterVec
}

// NewMetrics registers the collector's series with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		deleted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sless_source_gc_deleted_objects_total",
			Help: "Source archives and build contexts deleted because no Function needs them.",
		}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sless_source_gc_errors_total",
			Help: "Errors of the source collector: objects it could not delete, Functions it could not read (their objects are kept), listings that ended a sweep.",
		}),
		sweeps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sless_source_gc_sweeps_total",
			Help: "Sweeps of the source collector by result: ok, or failed when it met any error.",
		}, []string{"result"}),
	}
	var err1, err2, err3 error
	m.deleted, err1 = register(reg, m.deleted)
	m.errors, err2 = register(reg, m.errors)
	m.sweeps, err3 = register(reg, m.sweeps)
	if err := errors.Join(err1, err2, err3); err != nil {
		return nil, fmt.Errorf("register source gc metrics: %w", err)
	}
	m.sweeps.WithLabelValues("ok")
	m.sweeps.WithLabelValues("failed")
	return m, nil
}

// register registers c, or returns the collector of the same series
// registered before: a second Collector in one process (a controller
// started again on the same registry) counts into the first one's series.
func register[T prometheus.Collector](reg prometheus.Registerer, c T) (T, error) {
	err := reg.Register(c)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(T); ok {
			return existing, nil
		}
	}
	return c, err
}

// Collector sweeps object storage for objects no Function needs.
type Collector struct {
	opts Options
}

// Collector runs only on the leader: two sweeping at once would only
// repeat each other's work.
var _ manager.LeaderElectionRunnable = (*Collector)(nil)

// New makes a Collector; it does not sweep until Start or Sweep.
func New(opts Options) (*Collector, error) {
	if opts.Store == nil || opts.Objects == nil {
		return nil, errors.New("sourcegc: Store and Objects are required")
	}
	if opts.Grace < 0 || opts.Interval < 0 || opts.BatchSize < 0 {
		return nil, fmt.Errorf("sourcegc: grace %v, interval %v and batch size %d must not be negative", opts.Grace, opts.Interval, opts.BatchSize)
	}
	if opts.Grace == 0 {
		opts.Grace = DefaultGrace
	}
	if opts.Interval == 0 {
		opts.Interval = DefaultInterval
	}
	if opts.BatchSize == 0 {
		opts.BatchSize = DefaultBatchSize
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Collector{opts: opts}, nil
}

// NeedLeaderElection implements manager.LeaderElectionRunnable.
func (c *Collector) NeedLeaderElection() bool { return true }

// Start sweeps now and every Interval until ctx ends. A failed sweep is
// logged and counted; the next one tries again.
func (c *Collector) Start(ctx context.Context) error {
	t := time.NewTicker(c.opts.Interval)
	defer t.Stop()
	for {
		_, _ = c.Sweep(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Result tells what one sweep did.
type Result struct {
	// Listed counts the objects of sless's layout seen (others are never
	// touched and not counted).
	Listed int
	// Young were kept for being within the grace period.
	Young int
	// Needed were kept because their Function needs them.
	Needed int
	// Deleted counts the objects deleted.
	Deleted int
	// Errors counts the objects that could not be deleted, the Functions
	// that could not be read (their objects are kept) and a listing that
	// ended the sweep.
	Errors int
}

// Sweep makes one pass over the store, logs it and counts it. The error
// joins every error the sweep met; a sweep that met some still did what
// it could.
func (c *Collector) Sweep(ctx context.Context) (Result, error) {
	began := time.Now()
	var res Result
	err := c.sweep(ctx, &res)
	m := c.opts.Metrics
	if m != nil {
		m.deleted.Add(float64(res.Deleted))
	}
	if err != nil && ctx.Err() != nil {
		return res, err // stopping, not failing
	}
	attrs := []any{"listed", res.Listed, "young", res.Young, "needed", res.Needed,
		"deleted", res.Deleted, "errors", res.Errors, "grace", c.opts.Grace.String(), "took", time.Since(began).Round(time.Millisecond).String()}
	result := "ok"
	if err != nil {
		result = "failed"
		c.opts.Logger.Warn("source gc sweep", append(attrs, "error", err.Error())...)
	} else {
		c.opts.Logger.Info("source gc sweep", attrs...)
	}
	if m != nil {
		m.errors.Add(float64(res.Errors))
		m.sweeps.WithLabelValues(result).Inc()
	}
	return res, err
}

func (c *Collector) sweep(ctx context.Context, res *Result) error {
	// Functions first: an object uploaded after this read is young, and a
	// Function created or changed after it is read again before any of
	// its objects is deleted.
	needs, err := c.allNeeds(ctx)
	if err != nil {
		res.Errors++
		return err
	}
	cutoff := c.opts.Now().Add(-c.opts.Grace)
	var batch []candidate
	var errs []error
	err = c.opts.Store.List(ctx, "", func(o s3.Object) error {
		fn, ok := ownerOf(o.Key)
		if !ok {
			return nil
		}
		res.Listed++
		switch {
		case o.LastModified.After(cutoff):
			res.Young++
		case needs[fn].has(o.Key):
			res.Needed++
		default:
			batch = append(batch, candidate{key: o.Key, fn: fn})
		}
		if len(batch) >= c.opts.BatchSize {
			// Some objects refused do not stop the sweep: the others
			// may go, and the sweep's error tells of these.
			errs = append(errs, c.delete(ctx, batch, res))
			batch = batch[:0]
		}
		return ctx.Err()
	})
	if err != nil {
		res.Errors++
		return errors.Join(append(errs, fmt.Errorf("list objects: %w", err))...)
	}
	if len(batch) > 0 {
		errs = append(errs, c.delete(ctx, batch, res))
	}
	return errors.Join(errs...)
}

type candidate struct {
	key string
	fn  owner
}

// owner names the Function or SlessService an object belongs to.
type owner struct {
	service bool
	types.NamespacedName
}

// ownerOf tells whose object key is; ok is false for keys sless never
// wrote, which are never deleted.
func ownerOf(key string) (owner, bool) {
	if ns, name, _, ok := blobkey.Parse(key); ok {
		return owner{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}, true
	}
	if ns, name, _, ok := blobkey.ParseService(key); ok {
		return owner{service: true, NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}, true
	}
	return owner{}, false
}

// object is an empty object of o's kind to read into.
func (o owner) object() workload {
	if o.service {
		return &slessv1alpha1.SlessService{}
	}
	return &slessv1alpha1.Function{}
}

// workload is what needOf reads of a Function or a SlessService.
type workload interface {
	slessv1alpha1.Workload
	client.Object
	IsReady() bool
}

// delete reads the batch's Functions again, as they are now, and deletes
// the objects they still do not need. A Function that cannot be read
// keeps its objects for the next sweep.
func (c *Collector) delete(ctx context.Context, batch []candidate, res *Result) error {
	fresh := map[owner]need{}
	var errs []error
	var keys []string
	for _, cand := range batch {
		n, seen := fresh[cand.fn]
		if !seen {
			obj := cand.fn.object()
			err := c.opts.Objects.Get(ctx, cand.fn.NamespacedName, obj)
			switch {
			case apierrors.IsNotFound(err):
				n = need{}
			case err != nil:
				res.Errors++
				errs = append(errs, fmt.Errorf("read %s %s: %w", obj.WorkloadKind(), cand.fn.NamespacedName, err))
				n = need{all: true}
			default:
				n = needOf(obj)
			}
			fresh[cand.fn] = n
		}
		if n.has(cand.key) {
			res.Needed++
			continue
		}
		keys = append(keys, cand.key)
	}
	if len(keys) == 0 {
		return errors.Join(errs...)
	}
	gone, err := c.opts.Store.Delete(ctx, keys)
	res.Deleted += len(gone)
	res.Errors += len(keys) - len(gone)
	if err != nil {
		errs = append(errs, fmt.Errorf("delete objects: %w", err))
	}
	return errors.Join(errs...)
}

// allNeeds reads every Function and SlessService, a page at a time.
func (c *Collector) allNeeds(ctx context.Context) (map[owner]need, error) {
	needs := map[owner]need{}
	for cont := ""; ; {
		list := &slessv1alpha1.FunctionList{}
		if err := c.opts.Objects.List(ctx, list, client.Limit(listPage), client.Continue(cont)); err != nil {
			return nil, fmt.Errorf("list Functions: %w", err)
		}
		for i := range list.Items {
			fn := &list.Items[i]
			needs[owner{NamespacedName: client.ObjectKeyFromObject(fn)}] = needOf(fn)
		}
		if cont = list.Continue; cont == "" {
			break
		}
	}
	for cont := ""; ; {
		list := &slessv1alpha1.SlessServiceList{}
		if err := c.opts.Objects.List(ctx, list, client.Limit(listPage), client.Continue(cont)); err != nil {
			return nil, fmt.Errorf("list SlessServices: %w", err)
		}
		for i := range list.Items {
			svc := &list.Items[i]
			needs[owner{service: true, NamespacedName: client.ObjectKeyFromObject(svc)}] = needOf(svc)
		}
		if cont = list.Continue; cont == "" {
			return needs, nil
		}
	}
}

// need is what one Function needs of its objects: all of them, or those
// of keys. The zero need (no Function) needs none.
type need struct {
	all  bool
	keys []string
}

func (n need) has(key string) bool {
	if n.all {
		return true
	}
	for _, k := range n.keys {
		if k == key {
			return true
		}
	}
	return false
}

// needOf decides which of w's objects it needs; see the package comment.
func needOf(w workload) need {
	st := w.WorkloadStatus()
	switch {
	case w.GetDeletionTimestamp() != nil:
		return need{all: true}
	case st.ObservedGeneration != w.GetGeneration():
		return need{all: true}
	case st.LatestReadyRevision != "" && !w.IsReady():
		return need{all: true}
	}
	var n need
	if a := w.BuildSpec().Source.Archive; a != nil {
		n.keys = append(n.keys, a.Key)
	}
	if d := st.SourceDigest; d != "" {
		key := blobkey.Context(w.GetNamespace(), w.GetName(), d)
		if w.WorkloadKind() == slessv1alpha1.KindSlessService {
			key = blobkey.ServiceContext(w.GetNamespace(), w.GetName(), d)
		}
		n.keys = append(n.keys, key)
	}
	return n
}
