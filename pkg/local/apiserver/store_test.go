package apiserver_test

import (
	"context"
	"strconv"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/local/apiserver"
	"github.com/sless-dev/sless/pkg/local/localtest"
)

func rv(t *testing.T, o client.Object) int {
	t.Helper()
	n, err := strconv.Atoi(o.GetResourceVersion())
	if err != nil {
		t.Fatalf("resourceVersion %q is not a number", o.GetResourceVersion())
	}
	return n
}

func TestStoreCreateGet(t *testing.T) {
	ctx := context.Background()
	st, _ := localtest.OpenStore(t)
	fn := localtest.Function("team-a", "hello")
	fn.Status.Phase = slessv1alpha1.FunctionPhaseReady // dropped: status is a subresource
	fn.Generation = 7                                  // server-owned
	if err := st.Create(ctx, fn); err != nil {
		t.Fatal(err)
	}
	if fn.UID == "" || fn.CreationTimestamp.IsZero() || fn.Generation != 1 || fn.ResourceVersion == "" {
		t.Fatalf("server fields not set: uid=%q created=%v generation=%d rv=%q", fn.UID, fn.CreationTimestamp, fn.Generation, fn.ResourceVersion)
	}
	if fn.Status.Phase != "" {
		t.Fatalf("create stored status phase %q", fn.Status.Phase)
	}
	got := &slessv1alpha1.Function{Status: slessv1alpha1.FunctionStatus{URL: "stale"}}
	if err := st.Get(ctx, types.NamespacedName{Namespace: "team-a", Name: "hello"}, got); err != nil {
		t.Fatal(err)
	}
	if got.UID != fn.UID || got.Spec.Entrypoint != "main.handler" || got.Status.URL != "" {
		t.Fatalf("Get = %+v", got)
	}
	if got.APIVersion != "sless.dev/v1alpha1" || got.Kind != "Function" {
		t.Fatalf("Get type meta = %q %q", got.APIVersion, got.Kind)
	}

	err := st.Create(ctx, localtest.Function("team-a", "hello"))
	if !apierrors.IsAlreadyExists(err) {
		t.Fatalf("second create: %v, want AlreadyExists", err)
	}
	if err := st.Create(ctx, localtest.Function("team-b", "hello")); err != nil {
		t.Fatalf("same name in another namespace: %v", err)
	}
	err = st.Get(ctx, types.NamespacedName{Namespace: "team-a", Name: "nope"}, &slessv1alpha1.Function{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("Get missing: %v, want NotFound", err)
	}
	if se, ok := err.(apierrors.APIStatus); !ok || se.Status().Details.Group != "sless.dev" || se.Status().Details.Kind != "functions" {
		t.Fatalf("NotFound details = %+v, want group sless.dev resource functions", err)
	}

	gen := &slessv1alpha1.Function{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", GenerateName: "gen-"}, Spec: fn.Spec}
	if err := st.Create(ctx, gen); err != nil || len(gen.Name) != len("gen-")+5 {
		t.Fatalf("generateName: name %q, %v", gen.Name, err)
	}
}

func TestStoreCreateRefusals(t *testing.T) {
	ctx := context.Background()
	st, _ := localtest.OpenStore(t)
	withRV := localtest.Function("ns", "a")
	withRV.ResourceVersion = "5"
	cases := []struct {
		name string
		obj  client.Object
		want func(error) bool
	}{
		{"resourceVersion set", withRV, apierrors.IsBadRequest},
		{"no name", localtest.Function("ns", ""), apierrors.IsInvalid},
		{"no namespace", localtest.Function("", "a"), apierrors.IsBadRequest},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := st.Create(ctx, c.obj); !c.want(err) {
				t.Fatalf("Create: %v", err)
			}
		})
	}
	list := &slessv1alpha1.FunctionList{}
	if err := st.List(ctx, list); err != nil || len(list.Items) != 0 {
		t.Fatalf("refused creates stored %d objects (%v)", len(list.Items), err)
	}
	if err := st.Create(ctx, localtest.Function("ns", "dry"), client.DryRunAll); err != nil {
		t.Fatal(err)
	}
	if err := st.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "dry"}, &slessv1alpha1.Function{}); !apierrors.IsNotFound(err) {
		t.Fatalf("dry-run create stored the object: %v", err)
	}
}

func TestStoreUpdateGenerationAndConflicts(t *testing.T) {
	ctx := context.Background()
	st, _ := localtest.OpenStore(t)
	fn := localtest.Function("ns", "f")
	if err := st.Create(ctx, fn); err != nil {
		t.Fatal(err)
	}
	stale := fn.DeepCopy()

	// A metadata-only change keeps the generation.
	fn.Labels = map[string]string{"team": "a"}
	before := rv(t, fn)
	if err := st.Update(ctx, fn); err != nil {
		t.Fatal(err)
	}
	if fn.Generation != 1 || rv(t, fn) <= before {
		t.Fatalf("label update: generation %d rv %s", fn.Generation, fn.ResourceVersion)
	}
	// A spec change bumps it.
	fn.Spec.Entrypoint = "main.other"
	if err := st.Update(ctx, fn); err != nil {
		t.Fatal(err)
	}
	if fn.Generation != 2 {
		t.Fatalf("spec update: generation %d, want 2", fn.Generation)
	}
	// A stale resourceVersion conflicts.
	stale.Spec.Entrypoint = "main.stale"
	if err := st.Update(ctx, stale); !apierrors.IsConflict(err) {
		t.Fatalf("stale update: %v, want Conflict", err)
	}
	// No resourceVersion: unconditional, as for custom resources.
	stale.ResourceVersion = ""
	if err := st.Update(ctx, stale); err != nil {
		t.Fatalf("unconditional update: %v", err)
	}
	if stale.Generation != 3 || stale.Labels["team"] != "" {
		t.Fatalf("unconditional update: generation %d labels %v", stale.Generation, stale.Labels)
	}
	// An update that changes nothing keeps the resourceVersion.
	same := rv(t, stale)
	if err := st.Update(ctx, stale); err != nil || rv(t, stale) != same {
		t.Fatalf("no-op update: rv %s → %s, %v", strconv.Itoa(same), stale.ResourceVersion, err)
	}
	// Update ignores status; Status().Update changes only status.
	stale.Status.Phase = slessv1alpha1.FunctionPhaseReady
	stale.Spec.Entrypoint = "main.third"
	if err := st.Update(ctx, stale); err != nil {
		t.Fatal(err)
	}
	if stale.Status.Phase != "" {
		t.Fatalf("Update wrote status: %q", stale.Status.Phase)
	}
	stale.Status.Phase = slessv1alpha1.FunctionPhaseReady
	stale.Status.ObservedGeneration = stale.Generation
	stale.Spec.Entrypoint = "main.ignored"
	gen := stale.Generation
	if err := st.Status().Update(ctx, stale); err != nil {
		t.Fatal(err)
	}
	if stale.Status.Phase != slessv1alpha1.FunctionPhaseReady || stale.Spec.Entrypoint != "main.third" || stale.Generation != gen {
		t.Fatalf("status update: phase %q entrypoint %q generation %d", stale.Status.Phase, stale.Spec.Entrypoint, stale.Generation)
	}
	old := stale.DeepCopy()
	old.ResourceVersion = "1"
	if err := st.Status().Update(ctx, old); !apierrors.IsConflict(err) {
		t.Fatalf("stale status update: %v, want Conflict", err)
	}
	if err := st.Update(ctx, localtest.Function("ns", "missing")); !apierrors.IsNotFound(err) {
		t.Fatalf("update of a missing object: %v, want NotFound", err)
	}
}

func TestStorePatch(t *testing.T) {
	ctx := context.Background()
	st, _ := localtest.OpenStore(t)
	fn := localtest.Function("ns", "f")
	fn.Spec.MemoryMB = ptr.To[int32](256)
	fn.Spec.TimeoutSeconds = ptr.To[int32](60)
	if err := st.Create(ctx, fn); err != nil {
		t.Fatal(err)
	}
	merge := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"memoryMB":null,"timeoutSeconds":null},"status":{"phase":"Ready"}}`))
	if err := st.Patch(ctx, fn, merge); err != nil {
		t.Fatal(err)
	}
	// null removes both; the CRD's default takes timeoutSeconds' place,
	// and memoryMB has none (the site's applies at build).
	if fn.Spec.MemoryMB != nil || fn.Spec.TimeoutSeconds == nil || *fn.Spec.TimeoutSeconds != 30 || fn.Generation != 2 || fn.Status.Phase != "" {
		t.Fatalf("merge patch: memory %v timeout %v generation %d phase %q", fn.Spec.MemoryMB, fn.Spec.TimeoutSeconds, fn.Generation, fn.Status.Phase)
	}
	jp := client.RawPatch(types.JSONPatchType, []byte(`[{"op":"replace","path":"/spec/entrypoint","value":"main.x"}]`))
	if err := st.Patch(ctx, fn, jp); err != nil || fn.Spec.Entrypoint != "main.x" {
		t.Fatalf("json patch: %q, %v", fn.Spec.Entrypoint, err)
	}
	if err := st.Status().Patch(ctx, fn, client.RawPatch(types.MergePatchType, []byte(`{"status":{"phase":"Ready"},"spec":{"entrypoint":"main.y"}}`))); err != nil {
		t.Fatal(err)
	}
	if fn.Status.Phase != "Ready" || fn.Spec.Entrypoint != "main.x" {
		t.Fatalf("status patch: phase %q entrypoint %q", fn.Status.Phase, fn.Spec.Entrypoint)
	}
	// client.MergeFrom with an optimistic lock carries the resourceVersion.
	base := fn.DeepCopy()
	base.ResourceVersion = "1"
	changed := base.DeepCopy()
	changed.Spec.Entrypoint = "main.locked"
	if err := st.Patch(ctx, changed, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); !apierrors.IsConflict(err) {
		t.Fatalf("stale optimistic-lock patch: %v, want Conflict", err)
	}
	for name, p := range map[string]client.Patch{
		"strategic":     client.RawPatch(types.StrategicMergePatchType, []byte(`{}`)),
		"broken json":   client.RawPatch(types.MergePatchType, []byte(`{`)),
		"bad json path": client.RawPatch(types.JSONPatchType, []byte(`[{"op":"remove","path":"/spec/nothing"}]`)),
		"rename":        client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"name":"other"}}`)),
	} {
		err := st.Patch(ctx, fn.DeepCopy(), p)
		if err == nil || !(apierrors.IsBadRequest(err) || apierrors.IsUnsupportedMediaType(err)) {
			t.Errorf("%s patch: %v, want 400 or 415", name, err)
		}
	}
	if err := st.Patch(ctx, localtest.Function("ns", "missing"), merge); !apierrors.IsNotFound(err) {
		t.Fatalf("patch of a missing object: %v", err)
	}
}

func TestStoreFinalizersAndDeletion(t *testing.T) {
	ctx := context.Background()
	st, _ := localtest.OpenStore(t)
	fn := localtest.Function("ns", "f")
	fn.Finalizers = []string{"sless.dev/cleanup"}
	if err := st.Create(ctx, fn); err != nil {
		t.Fatal(err)
	}
	if err := st.Delete(ctx, fn); err != nil {
		t.Fatal(err)
	}
	got := &slessv1alpha1.Function{}
	key := client.ObjectKeyFromObject(fn)
	if err := st.Get(ctx, key, got); err != nil {
		t.Fatalf("an object with a finalizer went at once: %v", err)
	}
	if got.DeletionTimestamp == nil || got.Generation != 2 {
		t.Fatalf("deleting object: deletionTimestamp %v generation %d", got.DeletionTimestamp, got.Generation)
	}
	// A second delete is accepted and changes nothing.
	before := got.ResourceVersion
	if err := st.Delete(ctx, got.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	_ = st.Get(ctx, key, got)
	if got.ResourceVersion != before {
		t.Fatal("second delete changed the object")
	}
	// Create while deleting: AlreadyExists, and Get tells the deletion apart.
	if err := st.Create(ctx, localtest.Function("ns", "f")); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create while deleting: %v, want AlreadyExists", err)
	}
	// No new finalizers while deleting.
	more := got.DeepCopy()
	more.Finalizers = append(more.Finalizers, "other")
	if err := st.Update(ctx, more); !apierrors.IsInvalid(err) {
		t.Fatalf("adding a finalizer while deleting: %v, want Invalid", err)
	}
	// Removing the last finalizer removes the object.
	got.Finalizers = nil
	if err := st.Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	if err := st.Get(ctx, key, &slessv1alpha1.Function{}); !apierrors.IsNotFound(err) {
		t.Fatalf("after the last finalizer: %v, want NotFound", err)
	}
	if err := st.Delete(ctx, localtest.Function("ns", "f")); !apierrors.IsNotFound(err) {
		t.Fatalf("delete of a missing object: %v, want NotFound", err)
	}
	if err := st.Create(ctx, localtest.Function("ns", "f")); err != nil {
		t.Fatalf("create after the deletion finished: %v", err)
	}

	// Preconditions.
	cur := &slessv1alpha1.Function{}
	_ = st.Get(ctx, key, cur)
	wrong := types.UID("not-it")
	if err := st.Delete(ctx, cur, client.Preconditions{UID: &wrong}); !apierrors.IsConflict(err) {
		t.Fatalf("delete with a wrong UID: %v, want Conflict", err)
	}
	staleRV := "1"
	if err := st.Delete(ctx, cur, client.Preconditions{ResourceVersion: &staleRV}); !apierrors.IsConflict(err) {
		t.Fatalf("delete with a stale resourceVersion: %v, want Conflict", err)
	}
	if err := st.Delete(ctx, cur, client.Preconditions{UID: &cur.UID}); err != nil {
		t.Fatal(err)
	}
}

func TestStoreOwnerCascade(t *testing.T) {
	ctx := context.Background()
	st, _ := localtest.OpenStore(t)
	fn := localtest.Function("ns", "owner")
	if err := st.Create(ctx, fn); err != nil {
		t.Fatal(err)
	}
	ref := metav1.OwnerReference{APIVersion: "sless.dev/v1alpha1", Kind: "Function", Name: fn.Name, UID: fn.UID}
	owned := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "owned", OwnerReferences: []metav1.OwnerReference{ref}}}
	held := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "held", OwnerReferences: []metav1.OwnerReference{ref}, Finalizers: []string{"x"}}}
	free := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "free"}}
	trig := &slessv1alpha1.Trigger{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "t", OwnerReferences: []metav1.OwnerReference{ref}}, Spec: slessv1alpha1.TriggerSpec{Function: "owner", Type: "http"}}
	for _, o := range []client.Object{owned, held, free, trig} {
		if err := st.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Delete(ctx, fn); err != nil {
		t.Fatal(err)
	}
	if err := st.Get(ctx, client.ObjectKeyFromObject(owned), &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Errorf("owned ConfigMap survived its owner: %v", err)
	}
	if err := st.Get(ctx, client.ObjectKeyFromObject(trig), &slessv1alpha1.Trigger{}); !apierrors.IsNotFound(err) {
		t.Errorf("owned Trigger survived its owner: %v", err)
	}
	h := &corev1.ConfigMap{}
	if err := st.Get(ctx, client.ObjectKeyFromObject(held), h); err != nil || h.DeletionTimestamp == nil {
		t.Errorf("owned object with a finalizer: %v, deletionTimestamp %v", err, h.DeletionTimestamp)
	}
	if err := st.Get(ctx, client.ObjectKeyFromObject(free), &corev1.ConfigMap{}); err != nil {
		t.Errorf("unowned ConfigMap was deleted: %v", err)
	}
}

func TestStoreListSelectorsAndPaging(t *testing.T) {
	ctx := context.Background()
	st, _ := localtest.OpenStore(t)
	for _, ns := range []string{"a", "b"} {
		for i := 0; i < 5; i++ {
			fn := localtest.Function(ns, "f"+strconv.Itoa(i))
			fn.Labels = map[string]string{"even": strconv.FormatBool(i%2 == 0)}
			if err := st.Create(ctx, fn); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A namespace named as a prefix of another must not leak into it.
	if err := st.Create(ctx, localtest.Function("ab", "x")); err != nil {
		t.Fatal(err)
	}
	names := func(l *slessv1alpha1.FunctionList) []string {
		var out []string
		for _, it := range l.Items {
			out = append(out, it.Namespace+"/"+it.Name)
		}
		return out
	}
	all := &slessv1alpha1.FunctionList{}
	if err := st.List(ctx, all); err != nil || len(all.Items) != 11 || all.ResourceVersion == "" {
		t.Fatalf("List all: %v %v rv=%q", names(all), err, all.ResourceVersion)
	}
	inA := &slessv1alpha1.FunctionList{}
	if err := st.List(ctx, inA, client.InNamespace("a")); err != nil || len(inA.Items) != 5 {
		t.Fatalf("List in a: %v %v", names(inA), err)
	}
	even := &slessv1alpha1.FunctionList{}
	if err := st.List(ctx, even, client.InNamespace("b"), client.MatchingLabels{"even": "true"}); err != nil || len(even.Items) != 3 {
		t.Fatalf("List even in b: %v %v", names(even), err)
	}
	byName := &slessv1alpha1.FunctionList{}
	if err := st.List(ctx, byName, client.MatchingFields{"metadata.name": "f3"}); err != nil || len(byName.Items) != 2 {
		t.Fatalf("List by name: %v %v", names(byName), err)
	}
	if err := st.List(ctx, byName, client.MatchingFields{"spec.runtime": "x"}); !apierrors.IsBadRequest(err) {
		t.Fatalf("unsupported field selector: %v", err)
	}
	var paged []string
	cont := ""
	for pages := 0; ; pages++ {
		page := &slessv1alpha1.FunctionList{}
		if err := st.List(ctx, page, client.InNamespace("a"), client.Limit(2), client.Continue(cont)); err != nil {
			t.Fatal(err)
		}
		paged = append(paged, names(page)...)
		cont = page.Continue
		if cont == "" {
			break
		}
		if pages > 5 {
			t.Fatal("paging does not end")
		}
	}
	if len(paged) != 5 || paged[0] != "a/f0" || paged[4] != "a/f4" {
		t.Fatalf("paged = %v", paged)
	}
	if err := st.List(ctx, &slessv1alpha1.FunctionList{}, client.Continue("!!")); !apierrors.IsBadRequest(err) {
		t.Fatalf("bad continue token: %v", err)
	}
	empty := &slessv1alpha1.TriggerList{}
	if err := st.List(ctx, empty); err != nil || len(empty.Items) != 0 {
		t.Fatalf("List of a kind never stored: %v %v", empty.Items, err)
	}
}

func TestStoreEventsInCommitOrder(t *testing.T) {
	ctx := context.Background()
	st, _ := localtest.OpenStore(t)
	var mu sync.Mutex
	var got []apiserver.Event
	cancel := st.Subscribe(func(ev apiserver.Event) {
		mu.Lock()
		got = append(got, ev)
		mu.Unlock()
	})
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			fn := localtest.Function("ns", "f"+strconv.Itoa(i))
			if err := st.Create(ctx, fn); err != nil {
				t.Error(err)
				return
			}
			fn.Spec.Entrypoint = "main.two"
			if err := st.Update(ctx, fn); err != nil {
				t.Error(err)
			}
		}(i)
	}
	wg.Wait()
	cancel()
	_ = st.Create(ctx, localtest.Function("ns", "after-cancel"))
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 40 {
		t.Fatalf("%d events, want 40", len(got))
	}
	last := 0
	for _, ev := range got {
		n, _ := strconv.Atoi(ev.Object.GetResourceVersion())
		if n <= last {
			t.Fatalf("events out of commit order: rv %d after %d", n, last)
		}
		last = n
		if ev.GVK.Kind != "Function" || (ev.Type != watch.Added && ev.Type != watch.Modified) {
			t.Fatalf("event %+v", ev)
		}
	}
}

func TestStoreSurvivesReopen(t *testing.T) {
	ctx := context.Background()
	st, path := localtest.OpenStore(t)
	fn := localtest.Function("ns", "f")
	if err := st.Create(ctx, fn); err != nil {
		t.Fatal(err)
	}
	if _, err := apiserver.Open(path, localtest.Scheme(t)); err == nil {
		t.Fatal("a second store opened the same file while the first holds it")
	}
	st.Close()
	st2, err := apiserver.Open(path, localtest.Scheme(t))
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	got := &slessv1alpha1.Function{}
	if err := st2.Get(ctx, client.ObjectKeyFromObject(fn), got); err != nil || got.UID != fn.UID {
		t.Fatalf("after reopen: %v %v", got.UID, err)
	}
	other := localtest.Function("ns", "g")
	if err := st2.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	if rv(t, other) <= rv(t, fn) {
		t.Fatalf("resourceVersion went back after reopen: %s after %s", other.ResourceVersion, fn.ResourceVersion)
	}
}

// The store fills the CRD schemas' defaults as the apiserver does: on
// create, and on a write that leaves a defaulted field out; a default the
// stored object already holds is no change.
func TestStoreAppliesCRDDefaults(t *testing.T) {
	ctx := context.Background()
	st, _ := localtest.OpenStore(t)
	fn := localtest.Function("ns", "f")
	if err := st.Create(ctx, fn); err != nil {
		t.Fatal(err)
	}
	got := &slessv1alpha1.Function{}
	if err := st.Get(ctx, client.ObjectKeyFromObject(fn), got); err != nil {
		t.Fatal(err)
	}
	// memoryMB has no CRD default: the site's applies at build.
	if got.Spec.MemoryMB != nil ||
		got.Spec.TimeoutSeconds == nil || *got.Spec.TimeoutSeconds != slessv1alpha1.DefaultTimeoutSeconds ||
		got.Spec.BuildTimeoutSeconds == nil || *got.Spec.BuildTimeoutSeconds != slessv1alpha1.DefaultBuildTimeoutSeconds {
		t.Fatalf("created function reads back memory %v timeout %v build timeout %v, want the CRD defaults",
			got.Spec.MemoryMB, got.Spec.TimeoutSeconds, got.Spec.BuildTimeoutSeconds)
	}
	// An update that leaves them out (a client that never set them) is no
	// change: same generation, same resourceVersion.
	plain := localtest.Function("ns", "f")
	if err := st.Update(ctx, plain); err != nil {
		t.Fatal(err)
	}
	if plain.Generation != 1 || plain.ResourceVersion != got.ResourceVersion || *plain.Spec.TimeoutSeconds != slessv1alpha1.DefaultTimeoutSeconds {
		t.Fatalf("update without the defaulted fields: generation %d, resourceVersion %s (was %s), memory %v",
			plain.Generation, plain.ResourceVersion, got.ResourceVersion, plain.Spec.MemoryMB)
	}
	// Values given are kept.
	plain.Spec.MemoryMB = ptr.To[int32](512)
	if err := st.Update(ctx, plain); err != nil || *plain.Spec.MemoryMB != 512 || plain.Generation != 2 {
		t.Fatalf("update with memory 512: %v, generation %d, %v", plain.Spec.MemoryMB, plain.Generation, err)
	}

	// Triggers: enabled, and the queue settings inside a queue block given
	// without them (nothing is added where no queue block is).
	q := &slessv1alpha1.Trigger{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "orders"},
		Spec: slessv1alpha1.TriggerSpec{Function: "f", Type: slessv1alpha1.TriggerTypeQueue,
			Queue: &slessv1alpha1.QueueSpec{ConnectionSecret: "rabbit", Queue: "orders"}}}
	web := &slessv1alpha1.Trigger{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"},
		Spec: slessv1alpha1.TriggerSpec{Function: "f", Type: slessv1alpha1.TriggerTypeHTTP}}
	for _, tr := range []*slessv1alpha1.Trigger{q, web} {
		if err := st.Create(ctx, tr); err != nil {
			t.Fatal(err)
		}
		if tr.Spec.Enabled == nil || !*tr.Spec.Enabled {
			t.Fatalf("%s: enabled %v, want the default true", tr.Name, tr.Spec.Enabled)
		}
	}
	qs := q.Spec.Queue
	if qs.Prefetch == nil || *qs.Prefetch != 10 || qs.Concurrency == nil || *qs.Concurrency != 1 ||
		qs.MaxRetries == nil || *qs.MaxRetries != 3 || qs.BackoffSeconds == nil || *qs.BackoffSeconds != 1 {
		t.Fatalf("queue trigger reads back %+v, want the CRD defaults", qs)
	}
	if web.Spec.Queue != nil {
		t.Fatalf("http trigger got a queue block: %+v", web.Spec.Queue)
	}
}

// An object the store cannot turn into JSON it can keep is the caller's
// mistake, a 400 as the apiserver gives a body it cannot decode, not an
// internal error.
func TestStoreRefusesObjectsItCannotDecode(t *testing.T) {
	st, _ := localtest.OpenStore(t)
	for _, raw := range []string{`1e400`, `{"ids":[1,-1e999]}`} {
		fj := &slessv1alpha1.FunctionJob{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "run"},
			Spec: slessv1alpha1.FunctionJobSpec{Function: "f", Payload: &apiextensionsv1.JSON{Raw: []byte(raw)}}}
		if err := st.Create(context.Background(), fj); !apierrors.IsBadRequest(err) {
			t.Errorf("payload %s: %v, want BadRequest", raw, err)
		}
	}
}
