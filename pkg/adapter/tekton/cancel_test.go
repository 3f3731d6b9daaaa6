package tekton

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"testing"
	"time"

	tektonv1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"knative.dev/pkg/apis"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sless-dev/sless/pkg/adapter"
	"github.com/sless-dev/sless/pkg/adapter/resources"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/test/testbed"
)

func TestMain(m *testing.M) { testbed.Main(m) }

func digestOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(sum[:])
}

type cancelWorld struct {
	t   *testing.T
	k   *testbed.Kube
	sim *testbed.TektonSim
	ns  string
	b   *Builder
	fn  *slessv1alpha1.Function
}

func newCancelWorld(t *testing.T) *cancelWorld {
	k := testbed.SharedKube(t)
	sim := testbed.SharedTekton(t)
	ns := k.Namespace(t)
	sim.SetPolicy(ns, testbed.BuildPolicy{Mode: testbed.BuildHold})
	fn := &slessv1alpha1.Function{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "busy"},
		Spec: slessv1alpha1.FunctionSpec{
			WorkloadSpec: slessv1alpha1.WorkloadSpec{
				Runtime:    slessv1alpha1.RuntimePython312,
				Entrypoint: "main.handler",
				Source:     slessv1alpha1.FunctionSource{Inline: &slessv1alpha1.InlineSource{Files: map[string]string{"main.py": "x = 1\n"}}},
			},
		},
	}
	if err := k.Client.Create(context.Background(), fn); err != nil {
		t.Fatal(err)
	}
	return &cancelWorld{t: t, k: k, sim: sim, ns: ns, fn: fn,
		b: &Builder{Client: k.Client, APIReader: k.Client, Config: resources.Config{Registry: "reg.test/sless"}}}
}

// build ensures the build of source s and waits until the simulator runs it.
func (w *cancelWorld) build(s string) adapter.BuildState {
	w.t.Helper()
	st, err := w.b.EnsureBuild(context.Background(), w.fn, adapter.BuildInput{Digest: digestOf(s), Location: "s3://b/" + s})
	if err != nil {
		w.t.Fatalf("EnsureBuild %s: %v", s, err)
	}
	w.waitRun(st.Name, "running", func(pr *tektonv1.PipelineRun) bool { return pr.HasStarted() })
	return st
}

func (w *cancelWorld) run(name string) *tektonv1.PipelineRun {
	w.t.Helper()
	pr := &tektonv1.PipelineRun{}
	if err := w.k.Client.Get(context.Background(), types.NamespacedName{Namespace: w.ns, Name: name}, pr); err != nil {
		w.t.Fatalf("get PipelineRun %s: %v", name, err)
	}
	return pr
}

func (w *cancelWorld) waitRun(name, what string, cond func(*tektonv1.PipelineRun) bool) *tektonv1.PipelineRun {
	w.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		pr := w.run(name)
		if cond(pr) {
			return pr
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("PipelineRun %s not %s: spec.status %q, status %+v", name, what, pr.Spec.Status, pr.Status.Conditions)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A Function's runs in every state a superseded build meets: only the
// unfinished ones of other sources, which nobody else stops, are
// cancelled; the others keep their resourceVersion, untouched.
func TestCancelBuilds(t *testing.T) {
	w := newCancelWorld(t)
	ctx := context.Background()
	old := w.build("old")
	current := w.build("current")
	succeeded := w.build("succeeded")
	if err := w.sim.Succeed(ctx, w.ns, succeeded.Name); err != nil {
		t.Fatal(err)
	}
	failed := w.build("failed")
	if err := w.sim.Fail(ctx, w.ns, failed.Name, "", "no space left on device"); err != nil {
		t.Fatal(err)
	}
	stopping := w.build("stopping")
	stopped := w.run(stopping.Name)
	stopped.Spec.Status = tektonv1.PipelineRunSpecStatusStoppedRunFinally
	if err := w.k.Client.Update(ctx, stopped); err != nil {
		t.Fatal(err)
	}
	// A run left by an earlier Function of the same name, which garbage
	// collection has yet to remove: not this Function's to stop.
	ghost := w.fn.DeepCopy()
	ghost.UID = types.UID("0b7e1c2e-0000-4000-8000-000000000000")
	orphan := resources.MakePipelineRun(ghost, adapter.BuildInput{Digest: digestOf("orphan"), Location: "s3://b/orphan"}, 0, w.b.Config)
	if err := w.k.Client.Create(ctx, orphan); err != nil {
		t.Fatal(err)
	}
	w.waitRun(orphan.Name, "running", func(pr *tektonv1.PipelineRun) bool { return pr.HasStarted() })

	untouched := map[string]string{}
	for _, name := range []string{current.Name, succeeded.Name, failed.Name, stopping.Name, orphan.Name} {
		untouched[name] = w.run(name).ResourceVersion
	}

	w.fn.Generation = 7
	got, err := w.b.CancelBuilds(ctx, w.fn, digestOf("current"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []string{old.Name}) {
		t.Errorf("cancelled %v, want [%s]", got, old.Name)
	}
	pr := w.waitRun(old.Name, "cancelled by Tekton", func(pr *tektonv1.PipelineRun) bool { return pr.IsDone() })
	c := pr.Status.GetCondition(apis.ConditionSucceeded)
	if pr.Spec.Status != tektonv1.PipelineRunSpecStatusCancelled || pr.Annotations[resources.AnnotationSupersededBy] != "7" ||
		c.Status != corev1.ConditionFalse || c.Reason != string(tektonv1.PipelineRunReasonCancelled) {
		t.Errorf("old run: spec.status %q, annotations %v, condition %+v", pr.Spec.Status, pr.Annotations, c)
	}
	for name, rv := range untouched {
		if now := w.run(name).ResourceVersion; now != rv {
			t.Errorf("PipelineRun %s changed: resourceVersion %s → %s", name, rv, now)
		}
	}

	// A prebuilt image keeps no build: the one left running goes too.
	got, err = w.b.CancelBuilds(ctx, w.fn, "")
	if err != nil || !slices.Equal(got, []string{current.Name}) {
		t.Errorf("with nothing kept: cancelled %v, %v; want [%s]", got, err, current.Name)
	}
}

// The source of a cancelled build is asked for again: it is built by a new
// run, as the cancelled one will never yield the image, and asking again
// reports that run rather than starting another.
func TestCancelledSourceBuiltAgain(t *testing.T) {
	w := newCancelWorld(t)
	ctx := context.Background()
	first := w.build("a")
	w.build("b")
	w.fn.Generation = 2
	if _, err := w.b.CancelBuilds(ctx, w.fn, digestOf("b")); err != nil {
		t.Fatal(err)
	}
	w.waitRun(first.Name, "cancelled", func(pr *tektonv1.PipelineRun) bool { return pr.IsDone() })

	want := fmt.Sprintf("%s-%s-1", w.fn.Name, digestOf("a")[7:15])
	for i, created := range []bool{true, false} {
		st, err := w.b.EnsureBuild(ctx, w.fn, adapter.BuildInput{Digest: digestOf("a"), Location: "s3://b/a"})
		if err != nil {
			t.Fatal(err)
		}
		if st.Name != want || st.Created != created || st.Done {
			t.Errorf("call %d: %+v, want run %s created=%v, not done", i, st, want, created)
		}
	}
}

// A run that finished after it was read is not patched: the apiserver
// refuses the patch of the stale copy, and the run keeps its success.
func TestFinishedSinceReadNotCancelled(t *testing.T) {
	w := newCancelWorld(t)
	ctx := context.Background()
	st := w.build("a")
	stale := w.run(st.Name)
	if err := w.sim.Succeed(ctx, w.ns, st.Name); err != nil {
		t.Fatal(err)
	}
	ok, err := w.b.cancel(ctx, stale, 2)
	if ok || err != nil {
		t.Fatalf("cancel of a finished run: %v, %v", ok, err)
	}
	pr := w.run(st.Name)
	if pr.Spec.Status != "" || pr.Annotations[resources.AnnotationSupersededBy] != "" || !pr.IsSuccessful() {
		t.Errorf("finished run touched: spec.status %q, annotations %v, conditions %+v", pr.Spec.Status, pr.Annotations, pr.Status.Conditions)
	}
	var l tektonv1.PipelineRunList
	if err := w.k.Client.List(ctx, &l, client.InNamespace(w.ns)); err != nil || len(l.Items) != 1 {
		t.Errorf("%d runs, %v", len(l.Items), err)
	}
}
