package api_test

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sless-dev/sless/pkg/api"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
)

// racingStore is the cluster's client, except that the next Update of a
// Function after arm runs race first: another writer that gets in between
// the API's read and its write.
type racingStore struct {
	client.Client
	mu   sync.Mutex
	race func(ctx context.Context)
}

func (r *racingStore) arm(race func(ctx context.Context)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.race = race
}

func (r *racingStore) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	if _, ok := obj.(*slessv1alpha1.Function); ok {
		r.mu.Lock()
		race := r.race
		r.race = nil
		r.mu.Unlock()
		if race != nil {
			race(ctx)
		}
	}
	return r.Client.Update(ctx, obj, opts...)
}

// TestUploadPreconditions: an upload's If-Match and the Function's deletion
// are decided before anything is stored, and If-Match holds to the end.
// Before, If-Match was ignored for a missing Function (the zip was stored
// and the answer was 200), an upload to a Function being deleted stored its
// zip and build context and only then answered 409 (leaving them behind
// after the finalizer had emptied the Function's prefix), and an upload with
// If-Match that lost a race to another writer retried on the new version
// and answered 200, overriding the precondition.
func TestUploadPreconditions(t *testing.T) {
	var racing *racingStore
	e := newEnv(t, func(o *api.Options) {
		racing = &racingStore{Client: o.Objects.(client.Client)}
		o.Objects = racing
	})
	ctx := context.Background()
	tok := e.token("alice")
	zip := pythonZip(t, `"new"`)
	upload := func(name string, headers ...string) *response {
		return e.do("PUT", e.path("functions", name, "source"), tok, zip, append([]string{"Content-Type", "application/zip"}, headers...)...)
	}

	t.Run("If-Match of a missing Function", func(t *testing.T) {
		before := e.snapshot()
		r := upload("ghost", "If-Match", `"1"`)
		want(t, r, http.StatusPreconditionFailed)
		r.problem(t)
		if after := e.snapshot(); !slices.Equal(before, after) {
			t.Fatalf("an upload refused for If-Match stored something:\nbefore %v\nafter  %v", before, after)
		}
	})

	t.Run("Function being deleted", func(t *testing.T) {
		want(t, e.do("POST", e.path("functions"), tok, pythonFunction("doomed")), http.StatusCreated)
		doomed := e.getFunction("doomed")
		doomed.Finalizers = append(doomed.Finalizers, "test.sless.dev/hold")
		if err := e.kube.Client.Update(ctx, doomed); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			fn := &slessv1alpha1.Function{}
			if err := e.kube.Client.Get(ctx, clientKey(e.ns, "doomed"), fn); err == nil {
				fn.Finalizers = nil
				_ = e.kube.Client.Update(ctx, fn)
			}
		})
		if err := e.kube.Client.Delete(ctx, doomed); err != nil {
			t.Fatal(err)
		}
		before := e.snapshot()
		r := upload("doomed")
		want(t, r, http.StatusConflict)
		r.problem(t)
		if after := e.snapshot(); !slices.Equal(before, after) {
			t.Fatalf("an upload to a Function being deleted stored something:\nbefore %v\nafter  %v", before, after)
		}
	})

	// If-Match names the current version, but another writer changes the
	// Function before the upload's write: 412, and the other write stands.
	t.Run("If-Match and a lost race", func(t *testing.T) {
		want(t, e.do("POST", e.path("functions"), tok, pythonFunction("raced")), http.StatusCreated)
		rv := e.getFunction("raced").ResourceVersion
		racing.arm(func(ctx context.Context) {
			fn := &slessv1alpha1.Function{}
			if err := e.kube.Client.Get(ctx, clientKey(e.ns, "raced"), fn); err != nil {
				t.Error(err)
				return
			}
			fn.Labels["writer"] = "other"
			if err := e.kube.Client.Update(ctx, fn); err != nil {
				t.Error(err)
			}
		})
		r := upload("raced", "If-Match", `"`+rv+`"`)
		want(t, r, http.StatusPreconditionFailed)
		r.problem(t)
		fn := e.getFunction("raced")
		if fn.Spec.Source.Archive != nil || fn.Labels["writer"] != "other" {
			t.Fatalf("after a lost race under If-Match: source %+v, labels %v", fn.Spec.Source, fn.Labels)
		}
	})

	// Without If-Match the same race is retried on a fresh read.
	racing.arm(func(ctx context.Context) {
		fn := &slessv1alpha1.Function{}
		if err := e.kube.Client.Get(ctx, clientKey(e.ns, "raced"), fn); err != nil {
			t.Error(err)
			return
		}
		fn.Labels["writer"] = "again"
		if err := e.kube.Client.Update(ctx, fn); err != nil {
			t.Error(err)
		}
	})
	want(t, upload("raced"), http.StatusOK)
	if fn := e.getFunction("raced"); fn.Spec.Source.Archive == nil || fn.Labels["writer"] != "again" {
		t.Fatalf("after a lost race without If-Match: source %+v, labels %v", fn.Spec.Source, fn.Labels)
	}
}

// TestLostRaceSaysRetryAfter: a write that keeps losing the update race
// until its retries run out is a 409 with Retry-After, which a client may
// come back on, unlike the 409 of a stale metadata.resourceVersion, which
// has none. Before, both were bare 409s, so the Go client could not tell
// them apart and retried either for two minutes.
func TestLostRaceSaysRetryAfter(t *testing.T) {
	t.Parallel()
	var racing *racingStore
	e := newEnv(t, func(o *api.Options) {
		racing = &racingStore{Client: o.Objects.(client.Client)}
		o.Objects = racing
	})
	tok := e.token("alice")
	want(t, e.do("POST", e.path("functions"), tok, pythonFunction("hot")), http.StatusCreated)
	n := 0
	var race func(ctx context.Context)
	race = func(ctx context.Context) {
		n++
		fn := &slessv1alpha1.Function{}
		if err := e.kube.Client.Get(ctx, clientKey(e.ns, "hot"), fn); err != nil {
			t.Error(err)
			return
		}
		fn.Labels["writer"] = strconv.Itoa(n)
		if err := e.kube.Client.Update(ctx, fn); err != nil {
			t.Error(err)
		}
		racing.arm(race) // and again on the next attempt
	}
	racing.arm(race)
	r := e.do("PATCH", e.path("functions", "hot"), tok, `{"spec":{"memoryMB":256}}`, "Content-Type", api.MergePatchContentType)
	racing.arm(nil)
	want(t, r, http.StatusConflict)
	r.problem(t)
	if ra, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || ra < 1 {
		t.Fatalf("Retry-After = %q after %d lost races", r.Header.Get("Retry-After"), n)
	}

	stale := e.do("PATCH", e.path("functions", "hot"), tok, `{"metadata":{"resourceVersion":"1"},"spec":{"memoryMB":256}}`, "Content-Type", api.MergePatchContentType)
	want(t, stale, http.StatusConflict)
	if ra := stale.Header.Get("Retry-After"); ra != "" {
		t.Fatalf("a stale resourceVersion says Retry-After %q", ra)
	}
}
