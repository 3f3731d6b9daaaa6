package sourcegc_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sless-dev/sless/pkg/adapter/s3"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/local/apiserver"
	"github.com/sless-dev/sless/pkg/local/blobs"
	"github.com/sless-dev/sless/pkg/names/blobkey"
	"github.com/sless-dev/sless/pkg/sourcegc"
	"github.com/sless-dev/sless/test/testbed"
)

func TestMain(m *testing.M) { testbed.Main(m) }

// world is where the collector runs: object storage and the Functions.
type world struct {
	store  s3.Store
	bucket string
	fns    client.Client
	ns     string
}

// cluster is versitygw and the test apiserver, as `sless controller` sees them.
func cluster(t *testing.T) world {
	srv := testbed.SharedS3(t)
	bucket := srv.Bucket(t)
	c, err := s3.New(s3.Config{Endpoint: "http://" + srv.Endpoint, Bucket: bucket, AccessKey: srv.AccessKey, SecretKey: srv.SecretKey, PathStyle: true})
	if err != nil {
		t.Fatal(err)
	}
	kube := testbed.SharedKube(t)
	return world{store: c, bucket: bucket, fns: kube.Client, ns: kube.Namespace(t)}
}

// localMode is a data directory's blobs and object store, as `sless dev` has them.
func localMode(t *testing.T) world {
	dir := t.TempDir()
	blobs, err := blobs.New(filepath.Join(dir, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	if err := slessv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	store, err := apiserver.Open(filepath.Join(dir, "sless.db"), scheme)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return world{store: blobs, bucket: "local", fns: store, ns: "default"}
}

func sum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// put stores an object under key.
func (w world) put(t *testing.T, key string) {
	t.Helper()
	if err := w.store.Put(context.Background(), key, strings.NewReader(key), int64(len(key)), ""); err != nil {
		t.Fatal(err)
	}
}

// function makes a Function built from the archive of zip and sets its
// status to what mut makes of one that is Ready for its generation and
// built from the context of ctxDigest.
func (w world) function(t *testing.T, name, zip, ctxDigest string, mut func(fn *slessv1alpha1.Function)) {
	t.Helper()
	fn := &slessv1alpha1.Function{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name},
		Spec: slessv1alpha1.FunctionSpec{
			WorkloadSpec: slessv1alpha1.WorkloadSpec{
				Runtime:    "python3.12",
				Entrypoint: "main.handler",
				Source: slessv1alpha1.FunctionSource{Archive: &slessv1alpha1.ArchiveSource{
					Bucket: w.bucket, Key: blobkey.Source(w.ns, name, sum(zip)), SHA256: sum(zip)}},
			},
		},
	}
	w.ready(t, fn, ctxDigest, func() {
		if mut != nil {
			mut(fn)
		}
	})
}

// service makes a SlessService built from the archive of zip, Ready and
// built from the context of ctxDigest.
func (w world) service(t *testing.T, name, zip, ctxDigest string) {
	t.Helper()
	w.ready(t, &slessv1alpha1.SlessService{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name},
		Spec: slessv1alpha1.SlessServiceSpec{
			WorkloadSpec: slessv1alpha1.WorkloadSpec{
				Runtime:    "python3.12",
				Entrypoint: "app.app",
				Source: slessv1alpha1.FunctionSource{Archive: &slessv1alpha1.ArchiveSource{
					Bucket: w.bucket, Key: blobkey.ServiceSource(w.ns, name, sum(zip)), SHA256: sum(zip)}},
			},
		},
	}, ctxDigest, func() {})
}

// ready creates obj and writes the status of one Ready for its generation
// and built from the context of ctxDigest, as mut then changes it.
func (w world) ready(t *testing.T, obj interface {
	slessv1alpha1.Workload
	client.Object
}, ctxDigest string, mut func()) {
	t.Helper()
	ctx := context.Background()
	if err := w.fns.Create(ctx, obj); err != nil {
		t.Fatal(err)
	}
	name := obj.GetName()
	st := obj.WorkloadStatus()
	*st = slessv1alpha1.FunctionStatus{
		ObservedGeneration: obj.GetGeneration(), Phase: slessv1alpha1.FunctionPhaseReady,
		SourceDigest: "sha256:" + sum(ctxDigest), LatestReadyRevision: name + "-00001", LatestCreatedRevision: name + "-00001",
	}
	st.MarkPrebuiltImage()
	st.MarkServiceReady()
	mut()
	if err := w.fns.Status().Update(ctx, obj); err != nil {
		t.Fatal(err)
	}
}

// keys lists the stored keys.
func (w world) keys(t *testing.T) []string {
	t.Helper()
	var out []string
	if err := w.store.List(context.Background(), "", func(o s3.Object) error { out = append(out, o.Key); return nil }); err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// failedGeneration makes fn's current generation a failed build while its
// first revision still serves.
func failedGeneration(fn *slessv1alpha1.Function) {
	fn.Status.MarkBuildFailed("", "")
}

// The collector deletes objects no Function needs once they are older than
// the grace period, and keeps the rest: an upload for a Function being
// created, the archive and context a Function is built from, and every
// object of a Function whose older revision serves while its current
// generation failed, of one whose new generation is not reconciled yet,
// and of one being deleted. Keys not of sless's layout are never touched.
// The same rule holds in local mode, on its directory and store. Before,
// an upload whose Function was never created stayed for ever.
func TestSweep(t *testing.T) {
	for name, mk := range map[string]func(*testing.T) world{"cluster": cluster, "local": localMode} {
		t.Run(name, func(t *testing.T) { testSweep(t, mk(t)) })
	}
}

func testSweep(t *testing.T, w world) {
	ctx := context.Background()
	ns := w.ns
	src := func(fn, zip string) string { return blobkey.Source(ns, fn, sum(zip)) }
	cx := func(fn, c string) string { return blobkey.Context(ns, fn, sum(c)) }
	ssrc := func(svc, zip string) string { return blobkey.ServiceSource(ns, svc, sum(zip)) }
	scx := func(svc, c string) string { return blobkey.ServiceContext(ns, svc, sum(c)) }

	// What stays after the grace period, and what goes.
	kept := []string{
		src("ready", "v2"), cx("ready", "v2"), // named by spec and status
		src("rollback", "v1"), src("rollback", "v2"), cx("rollback", "v1"), // v1 serves, v2 failed
		src("pending", "v1"), src("pending", "v2"), // generation 2 not reconciled
		src("leaving", "v1"), src("leaving", "v0"), // the finalizer's
		src("never", "v2"), cx("never", "v2"), // never served, its current build
		"notes/readme.txt", ns + "/x/source/not-a-digest.zip", // not sless's layout
		ssrc("web", "v2"), scx("web", "v2"), // a SlessService's, named by spec and status
	}
	gone := []string{
		src("ghost", "v1"), cx("ghost", "v1"), // uploaded, never created
		src("ready", "v1"), cx("ready", "v1"), // superseded
		src("never", "v1"),                  // superseded, nothing serves it
		ssrc("web", "v1"), scx("web", "v1"), // superseded in a SlessService
		ssrc("ready", "v2"), scx("ready", "v2"), // no SlessService "ready": the Function's are not its
	}
	for _, k := range append(append([]string{}, kept...), gone...) {
		w.put(t, k)
	}
	w.function(t, "ready", "v2", "v2", nil)
	w.service(t, "web", "v2", "v2")
	w.function(t, "rollback", "v2", "v2", func(fn *slessv1alpha1.Function) {
		fn.Status.SourceDigest = "sha256:" + sum("v2")
		failedGeneration(fn)
	})
	w.function(t, "pending", "v1", "v1", nil)
	pending := &slessv1alpha1.Function{}
	if err := w.fns.Get(ctx, client.ObjectKey{Namespace: ns, Name: "pending"}, pending); err != nil {
		t.Fatal(err)
	}
	pending.Spec.Source.Archive = &slessv1alpha1.ArchiveSource{Bucket: w.bucket, Key: src("pending", "v2"), SHA256: sum("v2")}
	if err := w.fns.Update(ctx, pending); err != nil {
		t.Fatal(err)
	}
	w.function(t, "leaving", "v1", "v1", nil)
	leaving := &slessv1alpha1.Function{}
	if err := w.fns.Get(ctx, client.ObjectKey{Namespace: ns, Name: "leaving"}, leaving); err != nil {
		t.Fatal(err)
	}
	leaving.Finalizers = []string{"sless.dev/cleanup"}
	if err := w.fns.Update(ctx, leaving); err != nil {
		t.Fatal(err)
	}
	if err := w.fns.Delete(ctx, leaving); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Let the apiserver drop it: no controller runs here.
		if err := w.fns.Get(ctx, client.ObjectKeyFromObject(leaving), leaving); err == nil {
			leaving.Finalizers = nil
			_ = w.fns.Update(ctx, leaving)
		}
	})
	w.function(t, "never", "v2", "v2", func(fn *slessv1alpha1.Function) {
		fn.Status.LatestReadyRevision, fn.Status.LatestCreatedRevision = "", ""
		failedGeneration(fn)
	})

	reg := prometheus.NewRegistry()
	metrics, err := sourcegc.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	now := time.Now()
	sweep := func(at time.Time, batch int) sourcegc.Result {
		t.Helper()
		gc, err := sourcegc.New(sourcegc.Options{Store: w.store, Objects: w.fns, Grace: 24 * time.Hour, BatchSize: batch,
			Metrics: metrics, Logger: slog.New(slog.NewTextHandler(&logs, nil)), Now: func() time.Time { return at }})
		if err != nil {
			t.Fatal(err)
		}
		res, err := gc.Sweep(ctx)
		if err != nil {
			t.Fatalf("sweep: %v", err)
		}
		return res
	}
	all := w.keys(t)

	// Within the grace period everything stays, an upload for a Function
	// not created yet included.
	if res := sweep(now, 0); res.Deleted != 0 || res.Young != len(kept)-2+len(gone) {
		t.Errorf("sweep within the grace period: %+v; want all %d objects young", res, len(kept)-2+len(gone))
	}
	if got := w.keys(t); strings.Join(got, " ") != strings.Join(all, " ") {
		t.Fatalf("within the grace period the objects changed:\n%v\nwant\n%v", got, all)
	}

	// A day later the unneeded go, two at a time.
	res := sweep(now.Add(24*time.Hour+time.Minute), 2)
	want := append([]string{}, kept...)
	sort.Strings(want)
	if got := w.keys(t); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("after the grace period the objects are\n%v\nwant\n%v", got, want)
	}
	if res.Deleted != len(gone) || res.Errors != 0 {
		t.Errorf("sweep after the grace period: %+v; want %d deleted", res, len(gone))
	}
	for _, c := range []struct {
		name string
		want float64
	}{
		{"sless_source_gc_deleted_objects_total", float64(len(gone))},
		{"sless_source_gc_errors_total", 0},
	} {
		if got := counter(t, reg, c.name); got != c.want {
			t.Errorf("%s = %v, want %v", c.name, got, c.want)
		}
	}
	if n := strings.Count(logs.String(), `msg="source gc sweep"`); n != 2 || !strings.Contains(logs.String(), fmt.Sprintf("deleted=%d", len(gone))) {
		t.Errorf("want one log line per sweep, the second saying deleted=%d:\n%s", len(gone), logs.String())
	}
}

func counter(t *testing.T, g prometheus.Gatherer, name string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			total := 0.0
			for _, m := range mf.GetMetric() {
				total += m.GetCounter().GetValue()
			}
			return total
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// listThenCreate plays a create that lands while a sweep runs: right after
// the collector's first list of Functions, the Function naming an old
// upload is created.
type listThenCreate struct {
	client.Client
	once   sync.Once
	create func()
}

func (l *listThenCreate) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	err := l.Client.List(ctx, list, opts...)
	l.once.Do(l.create)
	return err
}

// A Function created after the sweep read the Functions, naming an upload
// the sweep found no Function for, keeps it: the Function is read again
// before its objects are deleted.
func TestSweepRereadsBeforeDeleting(t *testing.T) {
	for name, mk := range map[string]func(*testing.T) world{"cluster": cluster, "local": localMode} {
		t.Run(name, func(t *testing.T) {
			w := mk(t)
			ctx := context.Background()
			zip := blobkey.Source(w.ns, "late", sum("v1"))
			orphan := blobkey.Source(w.ns, "ghost", sum("v1"))
			w.put(t, zip)
			w.put(t, orphan)
			fns := &listThenCreate{Client: w.fns, create: func() {
				fn := &slessv1alpha1.Function{
					ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "late"},
					Spec: slessv1alpha1.FunctionSpec{
						WorkloadSpec: slessv1alpha1.WorkloadSpec{
							Runtime:    "python3.12",
							Entrypoint: "main.handler",
							Source:     slessv1alpha1.FunctionSource{Archive: &slessv1alpha1.ArchiveSource{Bucket: w.bucket, Key: zip, SHA256: sum("v1")}},
						},
					},
				}
				if err := w.fns.Create(ctx, fn); err != nil {
					t.Error(err)
				}
			}}
			gc, err := sourcegc.New(sourcegc.Options{Store: w.store, Objects: fns,
				Now: func() time.Time { return time.Now().Add(25 * time.Hour) }})
			if err != nil {
				t.Fatal(err)
			}
			res, err := gc.Sweep(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got := w.keys(t); len(got) != 1 || got[0] != zip || res.Deleted != 1 {
				t.Errorf("after the sweep %v (%+v); want only %s, the orphan %s deleted", got, res, zip, orphan)
			}
		})
	}
}

// A sweep that cannot reach object storage fails, says so in its log line
// and counts an error and a failed sweep, and deletes nothing.
func TestSweepUnreachableStorage(t *testing.T) {
	port, err := testbed.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	down, err := s3.New(s3.Config{Endpoint: fmt.Sprintf("http://127.0.0.1:%d", port), Bucket: "sless", PathStyle: true})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	metrics, err := sourcegc.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	gc, err := sourcegc.New(sourcegc.Options{Store: down, Objects: localMode(t).fns, Metrics: metrics,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	res, err := gc.Sweep(context.Background())
	if !errors.Is(err, s3.ErrUnavailable) || res.Deleted != 0 || res.Errors != 1 {
		t.Errorf("Sweep = %+v, %v; want ErrUnavailable, one error", res, err)
	}
	if got := counter(t, reg, "sless_source_gc_errors_total"); got != 1 {
		t.Errorf("errors_total = %v, want 1", got)
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "list objects") {
		t.Errorf("want a warning naming the listing:\n%s", logs.String())
	}
}

// A second collector on one registry (a controller started again in the
// same process) counts into the first one's series instead of failing.
func TestNewMetricsTwice(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := sourcegc.NewMetrics(reg); err != nil {
		t.Fatal(err)
	}
	if _, err := sourcegc.NewMetrics(reg); err != nil {
		t.Fatalf("second NewMetrics: %v", err)
	}
}
