package api_test

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sless-dev/sless/pkg/adapter/kube"
	"github.com/sless-dev/sless/pkg/api"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/auth"
)

func TestFunctionCRUD(t *testing.T) {
	e := newEnv(t)
	tok := e.token("alice")

	// Create: status on input is ignored.
	body := pythonFunction("hello")
	body["status"] = map[string]any{"phase": "Ready", "url": "http://forged"}
	r := e.do("POST", e.path("functions"), tok, body)
	want(t, r, http.StatusCreated)
	fn := decode[slessv1alpha1.Function](t, r)
	if fn.Status.Phase != "" || fn.Status.URL != "" {
		t.Fatalf("status was taken from the request: %+v", fn.Status)
	}
	if fn.Kind != "Function" || fn.APIVersion != "sless.dev/v1alpha1" || fn.Namespace != e.ns || fn.UID == "" {
		t.Fatalf("created object: %+v", fn.ObjectMeta)
	}
	if got := r.Header.Get("ETag"); got != `"`+fn.ResourceVersion+`"` {
		t.Fatalf("ETag %q, resourceVersion %q", got, fn.ResourceVersion)
	}
	if loc := r.Header.Get("Location"); loc != e.path("functions", "hello") {
		t.Fatalf("Location %q", loc)
	}
	if fn.Spec.MemoryMB != nil || *fn.Spec.TimeoutSeconds != slessv1alpha1.DefaultTimeoutSeconds {
		// memoryMB stays unset: resources may name memory instead.
		t.Fatalf("defaults: memoryMB %v, timeoutSeconds %v", fn.Spec.MemoryMB, fn.Spec.TimeoutSeconds)
	}

	// Read and list.
	r = e.do("GET", e.path("functions", "hello"), tok, nil)
	want(t, r, http.StatusOK)
	if got := decode[slessv1alpha1.Function](t, r); got.ResourceVersion != fn.ResourceVersion || got.ManagedFields != nil {
		t.Fatalf("GET gave %+v", got.ObjectMeta)
	}
	r = e.do("GET", e.path("functions"), tok, nil)
	want(t, r, http.StatusOK)
	if l := decode[struct {
		Items []slessv1alpha1.Function `json:"items"`
		Next  string                   `json:"next"`
	}](t, r); len(l.Items) != 1 || l.Items[0].Name != "hello" || l.Next != "" || l.Items[0].Kind != "Function" {
		t.Fatalf("list: %s", r.Body)
	}

	// Replace with a stale If-Match: 412, nothing changes.
	body = pythonFunction("hello")
	body["spec"].(map[string]any)["memoryMB"] = 256
	r = e.do("PUT", e.path("functions", "hello"), tok, body, "If-Match", `"1"`)
	want(t, r, http.StatusPreconditionFailed)
	r.problem(t)
	// Replace with the current ETag.
	r = e.do("PUT", e.path("functions", "hello"), tok, body, "If-Match", `"`+fn.ResourceVersion+`"`)
	want(t, r, http.StatusOK)
	put := decode[slessv1alpha1.Function](t, r)
	if *put.Spec.MemoryMB != 256 || put.Generation != 2 {
		t.Fatalf("after PUT: memoryMB %v generation %d", put.Spec.MemoryMB, put.Generation)
	}
	// A resourceVersion in the body that is stale is a conflict.
	body["metadata"].(map[string]any)["resourceVersion"] = fn.ResourceVersion
	r = e.do("PUT", e.path("functions", "hello"), tok, body)
	want(t, r, http.StatusConflict)

	// Merge patch: change one field, remove a label, keep the rest.
	patch := `{"metadata":{"labels":{"team":null,"tier":"gold"}},"spec":{"timeoutSeconds":60}}`
	r = e.do("PATCH", e.path("functions", "hello"), tok, patch, "Content-Type", api.MergePatchContentType)
	want(t, r, http.StatusOK)
	pat := decode[slessv1alpha1.Function](t, r)
	if *pat.Spec.TimeoutSeconds != 60 || *pat.Spec.MemoryMB != 256 || pat.Labels["tier"] != "gold" || pat.Labels["team"] != "" {
		t.Fatalf("after PATCH: %+v %+v", pat.Labels, pat.Spec)
	}
	// PATCH with If-Match of an older version: 412.
	r = e.do("PATCH", e.path("functions", "hello"), tok, `{"spec":{"timeoutSeconds":61}}`,
		"Content-Type", api.MergePatchContentType, "If-Match", `"`+put.ResourceVersion+`"`)
	want(t, r, http.StatusPreconditionFailed)
	// Switch the source to an image with a patch: inline is removed by null.
	r = e.do("PATCH", e.path("functions", "hello"), tok,
		`{"spec":{"source":{"inline":null,"image":"registry.example.com/hello@sha256:`+sha64+`"}}}`,
		"Content-Type", api.MergePatchContentType, "If-Match", `"`+pat.ResourceVersion+`"`)
	want(t, r, http.StatusOK)
	if got := decode[slessv1alpha1.Function](t, r); got.Spec.Source.Inline != nil || got.Spec.Source.Image == "" {
		t.Fatalf("source after patch: %+v", got.Spec.Source)
	}

	// Delete with a stale If-Match: 412; then delete: 204, then 404 twice.
	r = e.do("DELETE", e.path("functions", "hello"), tok, nil, "If-Match", `"1"`)
	want(t, r, http.StatusPreconditionFailed)
	r = e.do("DELETE", e.path("functions", "hello"), tok, nil)
	want(t, r, http.StatusNoContent)
	r = e.do("GET", e.path("functions", "hello"), tok, nil)
	want(t, r, http.StatusNotFound)
	r.problem(t)
	r = e.do("DELETE", e.path("functions", "hello"), tok, nil)
	want(t, r, http.StatusNotFound)
	r.problem(t)
}

const sha64 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestTriggerAndJobCRUD(t *testing.T) {
	e := newEnv(t)
	tok := e.token("alice")
	trg := map[string]any{"metadata": map[string]any{"name": "nightly"},
		"spec": map[string]any{"function": "hello", "type": "cron", "schedule": "0 3 * * *", "timeZone": "Europe/Berlin",
			"payload": map[string]any{"full": true}}}
	r := e.do("POST", e.path("triggers"), tok, trg)
	want(t, r, http.StatusCreated)
	created := decode[slessv1alpha1.Trigger](t, r)
	if created.Kind != "Trigger" || created.Spec.Enabled == nil || !*created.Spec.Enabled {
		t.Fatalf("trigger: %s", r.Body)
	}
	r = e.do("PATCH", e.path("triggers", "nightly"), tok, `{"spec":{"enabled":false,"schedule":"@hourly"}}`,
		"Content-Type", api.MergePatchContentType, "If-Match", r.Header.Get("ETag"))
	want(t, r, http.StatusOK)
	if got := decode[slessv1alpha1.Trigger](t, r); *got.Spec.Enabled || got.Spec.Schedule != "@hourly" || string(got.Spec.Payload.Raw) != `{"full":true}` {
		t.Fatalf("patched trigger: %s", r.Body)
	}
	trg["spec"] = map[string]any{"function": "hello", "type": "http"}
	r = e.do("PUT", e.path("triggers", "nightly"), tok, trg)
	want(t, r, http.StatusOK)
	if got := decode[slessv1alpha1.Trigger](t, r); got.Spec.Type != "http" || got.Spec.Schedule != "" {
		t.Fatalf("replaced trigger: %s", r.Body)
	}
	want(t, e.do("GET", e.path("triggers", "nightly"), tok, nil), http.StatusOK)
	want(t, e.do("DELETE", e.path("triggers", "nightly"), tok, nil), http.StatusNoContent)
	want(t, e.do("GET", e.path("triggers", "nightly"), tok, nil), http.StatusNotFound)

	job := map[string]any{"metadata": map[string]any{"name": "backfill"},
		"spec": map[string]any{"function": "hello", "runID": 1, "payload": []any{1, 2, 3}}}
	r = e.do("POST", e.path("jobs"), tok, job)
	want(t, r, http.StatusCreated)
	etag := r.Header.Get("ETag")
	r = e.do("PATCH", e.path("jobs", "backfill"), tok, `{"spec":{"runID":2}}`, "Content-Type", api.MergePatchContentType, "If-Match", etag)
	want(t, r, http.StatusOK)
	if got := decode[slessv1alpha1.FunctionJob](t, r); got.Spec.RunID != 2 || got.Kind != "FunctionJob" {
		t.Fatalf("patched job: %s", r.Body)
	}
	r = e.do("GET", e.path("jobs"), tok, nil)
	want(t, r, http.StatusOK)
	if l := decode[api.List](t, r); len(l.Items) != 1 {
		t.Fatalf("jobs: %s", r.Body)
	}
	want(t, e.do("DELETE", e.path("jobs", "backfill"), tok, nil, "If-Match", etag), http.StatusPreconditionFailed)
	want(t, e.do("DELETE", e.path("jobs", "backfill"), tok, nil), http.StatusNoContent)
	want(t, e.do("DELETE", e.path("jobs", "backfill"), tok, nil), http.StatusNotFound)
}

// TestDeleteThenRecreate holds a Function with a finalizer (envtest runs no
// controller, so only the test removes it): DELETE says 202, a create of the
// same name waits, then answers 409 with Retry-After; once the finalizer goes
// during the wait, the create succeeds.
func TestDeleteThenRecreate(t *testing.T) {
	e := newEnv(t)
	tok := e.token("alice")
	ctx := context.Background()
	want(t, e.do("POST", e.path("functions"), tok, pythonFunction("phoenix")), http.StatusCreated)
	fn := e.getFunction("phoenix")
	fn.Finalizers = []string{"sless.dev/test-hold"}
	if err := e.kube.Client.Update(ctx, fn); err != nil {
		t.Fatal(err)
	}

	r := e.do("DELETE", e.path("functions", "phoenix"), tok, nil)
	want(t, r, http.StatusAccepted)
	if got := decode[slessv1alpha1.Function](t, r); got.DeletionTimestamp == nil {
		t.Fatalf("202 body is not the deleting object: %s", r.Body)
	}
	// Still deleting: updates are refused as conflicts, not applied.
	want(t, e.do("PUT", e.path("functions", "phoenix"), tok, pythonFunction("phoenix")), http.StatusConflict)

	start := time.Now()
	r = e.do("POST", e.path("functions"), tok, pythonFunction("phoenix"))
	want(t, r, http.StatusConflict)
	if ra, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || ra < 1 {
		t.Fatalf("Retry-After = %q", r.Header.Get("Retry-After"))
	}
	if waited := time.Since(start); waited < 900*time.Millisecond {
		t.Fatalf("the create answered after %v, before the 1 s DeleteWait", waited)
	}
	r.problem(t)

	// Remove the finalizer while a create is waiting.
	errc := make(chan error, 1)
	go func() {
		time.Sleep(300 * time.Millisecond)
		cur := &slessv1alpha1.Function{}
		err := e.kube.Client.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "phoenix"}, cur)
		if err == nil {
			cur.Finalizers = nil
			err = e.kube.Client.Update(ctx, cur)
		}
		errc <- err
	}()
	r = e.do("POST", e.path("functions"), tok, pythonFunction("phoenix"))
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	want(t, r, http.StatusCreated)
	if got := decode[slessv1alpha1.Function](t, r); got.UID == fn.UID || got.DeletionTimestamp != nil {
		t.Fatalf("recreated object is the old one: %s", r.Body)
	}
	// A live object of the same name is a plain 409 without waiting.
	start = time.Now()
	want(t, e.do("POST", e.path("functions"), tok, pythonFunction("phoenix")), http.StatusConflict)
	if time.Since(start) > 500*time.Millisecond {
		t.Fatal("a create over a live object waited")
	}
}

func TestListPagination(t *testing.T) {
	e := newEnv(t)
	tok := e.token("alice")
	for i := range 7 {
		body := map[string]any{"metadata": map[string]any{"name": "t" + strconv.Itoa(i)}, "spec": map[string]any{"function": "f", "type": "http"}}
		want(t, e.do("POST", e.path("triggers"), tok, body), http.StatusCreated)
	}
	seen := map[string]bool{}
	cursor, pages := "", 0
	for {
		p := e.path("triggers") + "?limit=3"
		if cursor != "" {
			p += "&cursor=" + cursor
		}
		r := e.do("GET", p, tok, nil)
		want(t, r, http.StatusOK)
		l := decode[struct {
			Items []slessv1alpha1.Trigger `json:"items"`
			Next  string                  `json:"next"`
		}](t, r)
		pages++
		for _, it := range l.Items {
			if seen[it.Name] {
				t.Fatalf("%s listed twice", it.Name)
			}
			seen[it.Name] = true
		}
		if l.Next == "" {
			break
		}
		cursor = l.Next
	}
	if len(seen) != 7 || pages != 3 {
		t.Fatalf("saw %d triggers in %d pages", len(seen), pages)
	}
}

// TestTenancy: a tenant's namespace is derived from its subject and created
// on first use with labels; another tenant gets 403 for it whether or not an
// object exists, with the same body; an admin may act there.
func TestTenancy(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	carol := e.token("carol-"+e.ns, "sless.dev/namespace", nil)
	r := e.do("GET", "/v1/whoami", carol, nil)
	want(t, r, http.StatusOK)
	id := decode[auth.Identity](t, r)
	if id.Namespace != auth.NamespaceFor(auth.DefaultNamespacePrefix, "carol-"+e.ns) || id.Admin {
		t.Fatalf("whoami: %+v", id)
	}
	ns := &corev1.Namespace{}
	if err := e.kube.Client.Get(ctx, client.ObjectKey{Name: id.Namespace}, ns); err != nil {
		t.Fatalf("tenant namespace was not created: %v", err)
	}
	if ns.Labels[kube.TenantLabel] != "true" || ns.Annotations[kube.SubjectAnnotation] != id.Subject {
		t.Fatalf("tenant namespace labels %v annotations %v", ns.Labels, ns.Annotations)
	}
	t.Cleanup(func() { _ = e.kube.Client.Delete(context.Background(), ns) })
	carolFns := "/v1/namespaces/" + id.Namespace + "/functions"
	want(t, e.do("POST", carolFns, carol, pythonFunction("mine")), http.StatusCreated)

	// Alice (namespace e.ns) against carol's: an existing and a missing name
	// answer identically.
	alice := e.token("alice")
	exists := e.do("GET", carolFns+"/mine", alice, nil)
	missing := e.do("GET", carolFns+"/nothing", alice, nil)
	want(t, exists, http.StatusForbidden)
	want(t, missing, http.StatusForbidden)
	pe, pm := exists.problem(t), missing.problem(t)
	if pe.Detail != pm.Detail || pe.Type != pm.Type {
		t.Fatalf("403 bodies differ: %q vs %q", pe.Detail, pm.Detail)
	}
	want(t, e.do("DELETE", carolFns+"/mine", alice, nil), http.StatusForbidden)
	want(t, e.do("GET", carolFns, alice, nil), http.StatusForbidden)

	admin := e.token("root", "sless.dev/admin", true)
	want(t, e.do("GET", carolFns+"/mine", admin, nil), http.StatusOK)
	want(t, e.do("GET", e.path("functions"), admin, nil), http.StatusOK)
}

// TestConcurrentUploads sends two different zips to one function at once,
// several times over: every round ends with the spec naming one of the two
// archives, both archives stored and readable, and the download equal to the
// archive the spec names.
func TestConcurrentUploads(t *testing.T) {
	e := newEnv(t)
	tok := e.token("alice")
	want(t, e.do("POST", e.path("functions"), tok, pythonFunction("racer")), http.StatusCreated)
	for round := range 4 {
		zips := [][]byte{pythonZip(t, `"a`+strconv.Itoa(round)+`"`), pythonZip(t, `"b`+strconv.Itoa(round)+`"`)}
		results := make([]*api.UploadResult, 2)
		var wg sync.WaitGroup
		for i := range zips {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := e.do("PUT", e.path("functions", "racer", "source"), tok, zips[i], "Content-Type", "application/zip")
				if r.Code != http.StatusOK {
					t.Errorf("upload %d: %d %s", i, r.Code, r.Body)
					return
				}
				results[i] = decode[api.UploadResult](t, r)
			}()
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		fn := e.getFunction("racer")
		a := fn.Spec.Source.Archive
		if a == nil || fn.Spec.Source.Inline != nil {
			t.Fatalf("round %d: source %+v", round, fn.Spec.Source)
		}
		if *a != results[0].Archive && *a != results[1].Archive {
			t.Fatalf("round %d: spec names %s, neither upload's", round, a.SHA256)
		}
		for i, res := range results {
			if !e.blobExists(res.Archive.Key) || res.BuildContext == nil || !e.blobExists(res.BuildContext.Key) {
				t.Fatalf("round %d: upload %d's objects are not all stored", round, i)
			}
		}
		r := e.do("GET", e.path("functions", "racer", "source"), tok, nil)
		want(t, r, http.StatusOK)
		if sum := sha256hex(r.Body); sum != a.SHA256 {
			t.Fatalf("round %d: download has sha256 %s, spec says %s", round, sum, a.SHA256)
		}
	}
}

// TestConcurrentPatches sends many merge patches without preconditions to
// one function at once, each setting its own label. A patch without a
// precondition means "make it so": every one answers 200, however often it
// lost the update race, and none undoes another.
func TestConcurrentPatches(t *testing.T) {
	e := newEnv(t)
	tok := e.token("alice")
	want(t, e.do("POST", e.path("functions"), tok, pythonFunction("crowded")), http.StatusCreated)
	const writers = 30
	var wg sync.WaitGroup
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := `{"metadata":{"labels":{"writer-` + strconv.Itoa(i) + `":"yes"}}}`
			r := e.do("PATCH", e.path("functions", "crowded"), tok, body, "Content-Type", api.MergePatchContentType)
			if r.Code != http.StatusOK {
				t.Errorf("writer %d: %d %s", i, r.Code, r.Body)
			}
		}()
	}
	wg.Wait()
	labels := e.getFunction("crowded").Labels
	for i := range writers {
		if labels["writer-"+strconv.Itoa(i)] != "yes" {
			t.Errorf("writer %d's label is missing: %v", i, labels)
		}
	}
}

// TestListCursorBoundToItsList: a cursor continues only the list that gave
// it. Passed to another kind's list, with another selector, or forged, it is
// a 400 naming cursor rather than a silent start part-way through.
func TestListCursorBoundToItsList(t *testing.T) {
	e := newEnv(t)
	tok := e.token("alice")
	for _, name := range []string{"a", "b"} {
		want(t, e.do("POST", e.path("functions"), tok, pythonFunction(name)), http.StatusCreated)
		body := map[string]any{"metadata": map[string]any{"name": name}, "spec": map[string]any{"function": name, "type": "http"}}
		want(t, e.do("POST", e.path("triggers"), tok, body), http.StatusCreated)
	}
	r := e.do("GET", e.path("functions")+"?limit=1", tok, nil)
	want(t, r, http.StatusOK)
	next := decode[api.List](t, r).Next
	if next == "" {
		t.Fatal("no cursor after the first of two functions")
	}
	want(t, e.do("GET", e.path("functions")+"?limit=1&cursor="+next, tok, nil), http.StatusOK)
	for name, path := range map[string]string{
		"another kind":     e.path("triggers") + "?limit=1&cursor=" + next,
		"another selector": e.path("functions") + "?limit=1&labelSelector=app&cursor=" + next,
		"forged":           e.path("functions") + "?limit=1&cursor=" + next[:len(next)-2],
	} {
		r := e.do("GET", path, tok, nil)
		if r.Code != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", name, r.Code, r.Body)
			continue
		}
		if p := decode[api.Problem](t, r); len(p.Errors) != 1 || p.Errors[0].Field != "cursor" {
			t.Errorf("%s: errors %+v, want one naming cursor", name, p.Errors)
		}
	}
}

// TestTenantNamespaceMadeAgain: a tenant whose namespace was deleted after
// the API made it (the tenant removed, then back) gets it made again on its
// next create; before, the API remembered it as made and answered every
// create 404 "namespaces ... not found" until it restarted.
func TestTenantNamespaceMadeAgain(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	ns := e.ns + "-gone"
	tok := e.token("bob", "sless.dev/namespace", ns)
	path := "/v1/namespaces/" + ns + "/functions"
	want(t, e.do("POST", path, tok, pythonFunction("first")), http.StatusCreated)

	// Delete the namespace for good: envtest runs no namespace controller,
	// so its finalizer is lifted here, as that controller would.
	nsObj := &corev1.Namespace{}
	if err := e.kube.Client.Get(ctx, client.ObjectKey{Name: ns}, nsObj); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.kube.Client.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})
	if err := e.kube.Client.Delete(ctx, nsObj); err != nil {
		t.Fatal(err)
	}
	if err := e.kube.Client.Get(ctx, client.ObjectKey{Name: ns}, nsObj); err != nil {
		t.Fatal(err)
	}
	nsObj.Spec.Finalizers = nil
	if err := e.kube.Client.SubResource("finalize").Update(ctx, nsObj); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for err := e.kube.Client.Get(ctx, client.ObjectKey{Name: ns}, nsObj); !apierrors.IsNotFound(err); err = e.kube.Client.Get(ctx, client.ObjectKey{Name: ns}, nsObj) {
		if time.Now().After(deadline) {
			t.Fatalf("namespace %s not gone: %v", ns, err)
		}
		time.Sleep(50 * time.Millisecond)
	}

	want(t, e.do("POST", path, tok, pythonFunction("second")), http.StatusCreated)
	if err := e.kube.Client.Get(ctx, client.ObjectKey{Name: ns}, nsObj); err != nil || nsObj.Labels["sless.dev/tenant"] != "true" {
		t.Fatalf("the tenant namespace was not made again: %v %v", err, nsObj.Labels)
	}
}
