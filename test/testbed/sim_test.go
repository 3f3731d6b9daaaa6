package testbed_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	tektonv1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"knative.dev/pkg/apis"
	servingv1 "knative.dev/serving/pkg/apis/serving/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sless-dev/sless/test/testbed"
)

// eventually polls cond until it returns true or the deadline passes.
func eventually(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var lastErr error
	for time.Now().Before(deadline) {
		ok, err := cond()
		if ok {
			return
		}
		lastErr = err
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s (last error: %v)", what, lastErr)
}

func newPipelineRun(ns, name string) *tektonv1.PipelineRun {
	return &tektonv1.PipelineRun{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: tektonv1.PipelineRunSpec{
			Params: tektonv1.Params{
				{Name: testbed.SimParamImage, Value: *tektonv1.NewStructuredValues("registry.test/fn/" + name)},
				{Name: "CONTEXT", Value: *tektonv1.NewStructuredValues("s3://bucket/ctx.tar.gz")},
			},
			PipelineSpec: &tektonv1.PipelineSpec{Tasks: []tektonv1.PipelineTask{{
				Name: "build",
				TaskSpec: &tektonv1.EmbeddedTask{TaskSpec: tektonv1.TaskSpec{Steps: []tektonv1.Step{
					{Name: "fetch", Image: "busybox"},
					{Name: "kaniko", Image: "kaniko"},
				}}},
			}}},
		},
	}
}

func getPR(t *testing.T, k *testbed.Kube, ns, name string) *tektonv1.PipelineRun {
	t.Helper()
	pr := &tektonv1.PipelineRun{}
	if err := k.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, pr); err != nil {
		t.Fatalf("get PipelineRun: %v", err)
	}
	return pr
}

func TestTektonSimulator(t *testing.T) {
	k := testbed.SharedKube(t)
	sim := testbed.SharedTekton(t)
	ctx := context.Background()

	t.Run("succeeds at once with results", func(t *testing.T) {
		ns := k.Namespace(t)
		pr := newPipelineRun(ns, "ok")
		if err := k.Client.Create(ctx, pr); err != nil {
			t.Fatal(err)
		}
		eventually(t, "PipelineRun done", func() (bool, error) {
			return getPR(t, k, ns, "ok").IsDone(), nil
		})
		got := getPR(t, k, ns, "ok")
		if !got.IsSuccessful() {
			t.Fatalf("not successful: %+v", got.Status.Conditions)
		}
		c := got.Status.GetCondition(apis.ConditionSucceeded)
		if c.Reason != "Succeeded" {
			t.Errorf("reason %q, want Succeeded", c.Reason)
		}
		if got.Status.StartTime == nil || got.Status.CompletionTime == nil || got.Status.CompletionTime.Before(got.Status.StartTime) {
			t.Errorf("start %v completion %v", got.Status.StartTime, got.Status.CompletionTime)
		}
		results := map[string]string{}
		for _, r := range got.Status.Results {
			results[r.Name] = r.Value.StringVal
		}
		if results[testbed.SimResultURL] != "registry.test/fn/ok" {
			t.Errorf("IMAGE_URL %q", results[testbed.SimResultURL])
		}
		if d := results[testbed.SimResultDigest]; d != testbed.SimDigest(got) || len(d) != len("sha256:")+64 {
			t.Errorf("IMAGE_DIGEST %q, want %q", d, testbed.SimDigest(got))
		}
		if n := sim.Started(ns, "ok"); n != 1 {
			t.Errorf("started %d times, want 1", n)
		}
	})

	t.Run("holds until told to succeed", func(t *testing.T) {
		ns := k.Namespace(t)
		sim.SetPolicy(ns, testbed.BuildPolicy{Mode: testbed.BuildHold})
		if err := k.Client.Create(ctx, newPipelineRun(ns, "held")); err != nil {
			t.Fatal(err)
		}
		eventually(t, "PipelineRun running", func() (bool, error) {
			return getPR(t, k, ns, "held").HasStarted(), nil
		})
		pr := getPR(t, k, ns, "held")
		c := pr.Status.GetCondition(apis.ConditionSucceeded)
		if pr.IsDone() || c == nil || c.Reason != "Running" {
			t.Fatalf("want Running, got %+v", pr.Status.Conditions)
		}
		if err := sim.Succeed(ctx, ns, "held"); err != nil {
			t.Fatal(err)
		}
		if pr := getPR(t, k, ns, "held"); !pr.IsSuccessful() {
			t.Fatalf("not successful after Succeed: %+v", pr.Status.Conditions)
		}
		if err := sim.Succeed(ctx, ns, "held"); err == nil {
			t.Error("a second Succeed of a finished run did not fail")
		}
	})

	t.Run("fails with the step's message on a TaskRun", func(t *testing.T) {
		ns := k.Namespace(t)
		sim.SetPolicy(ns, testbed.BuildPolicy{Mode: testbed.BuildFail, Message: "error building image: pip install failed"})
		if err := k.Client.Create(ctx, newPipelineRun(ns, "bad")); err != nil {
			t.Fatal(err)
		}
		eventually(t, "PipelineRun done", func() (bool, error) {
			return getPR(t, k, ns, "bad").IsDone(), nil
		})
		pr := getPR(t, k, ns, "bad")
		c := pr.Status.GetCondition(apis.ConditionSucceeded)
		if !pr.IsFailure() || c.Reason != "Failed" {
			t.Fatalf("want Failed, got %+v", pr.Status.Conditions)
		}
		if len(pr.Status.ChildReferences) != 1 || pr.Status.ChildReferences[0].Kind != "TaskRun" || pr.Status.ChildReferences[0].PipelineTaskName != "build" {
			t.Fatalf("child references %+v", pr.Status.ChildReferences)
		}
		tr := &tektonv1.TaskRun{}
		if err := k.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: pr.Status.ChildReferences[0].Name}, tr); err != nil {
			t.Fatal(err)
		}
		tc := tr.Status.GetCondition(apis.ConditionSucceeded)
		if tc == nil || tc.Status != corev1.ConditionFalse || tc.Message != "error building image: pip install failed" {
			t.Errorf("TaskRun condition %+v", tc)
		}
		if st := tr.Status.Steps; len(st) != 2 || st[0].Name != "fetch" || st[0].Terminated == nil || st[0].Terminated.ExitCode != 0 ||
			st[1].Name != "kaniko" || st[1].Terminated == nil || st[1].Terminated.ExitCode != 1 {
			t.Errorf("steps %+v", st)
		}
		if !metav1.IsControlledBy(tr, pr) {
			t.Error("TaskRun is not controlled by its PipelineRun")
		}
	})

	t.Run("fails on command with a timeout reason", func(t *testing.T) {
		ns := k.Namespace(t)
		sim.SetPolicy(ns, testbed.BuildPolicy{Mode: testbed.BuildHold})
		if err := k.Client.Create(ctx, newPipelineRun(ns, "slow")); err != nil {
			t.Fatal(err)
		}
		eventually(t, "PipelineRun running", func() (bool, error) {
			return getPR(t, k, ns, "slow").HasStarted(), nil
		})
		if err := sim.Fail(ctx, ns, "slow", "PipelineRunTimeout", "timed out"); err != nil {
			t.Fatal(err)
		}
		if c := getPR(t, k, ns, "slow").Status.GetCondition(apis.ConditionSucceeded); c.Reason != "PipelineRunTimeout" || c.Status != corev1.ConditionFalse {
			t.Errorf("condition %+v", c)
		}
	})

	t.Run("finishes after a delay", func(t *testing.T) {
		ns := k.Namespace(t)
		sim.SetPolicy(ns, testbed.BuildPolicy{Delay: 300 * time.Millisecond})
		start := time.Now()
		if err := k.Client.Create(ctx, newPipelineRun(ns, "later")); err != nil {
			t.Fatal(err)
		}
		eventually(t, "PipelineRun done", func() (bool, error) {
			return getPR(t, k, ns, "later").IsDone(), nil
		})
		if d := time.Since(start); d < 300*time.Millisecond {
			t.Errorf("finished after %v, before the 300ms delay", d)
		}
		pr := getPR(t, k, ns, "later")
		if !pr.IsSuccessful() {
			t.Errorf("not successful: %+v", pr.Status.Conditions)
		}
	})
}

// Images pinned by digest, which Knative's webhook checks are well formed.
var (
	image1 = "registry.example/img@sha256:" + strings.Repeat("1", 64)
	image2 = "registry.example/img@sha256:" + strings.Repeat("2", 64)
)

func newService(ns, name, image string) *servingv1.Service {
	svc := &servingv1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	svc.Spec.Template.Spec.Containers = []corev1.Container{{Image: image}}
	return svc
}

func getSvc(t *testing.T, k *testbed.Kube, ns, name string) *servingv1.Service {
	t.Helper()
	svc := &servingv1.Service{}
	if err := k.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, svc); err != nil {
		t.Fatalf("get Service: %v", err)
	}
	return svc
}

func TestKnativeSimulator(t *testing.T) {
	k := testbed.SharedKube(t)
	sim := testbed.SharedKnative(t)
	ctx := context.Background()
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("hi")) }))
	defer backend.Close()

	t.Run("ready with a local URL, then a new revision", func(t *testing.T) {
		ns := k.Namespace(t)
		sim.SetPolicy(ns, testbed.ServePolicy{URL: func(*servingv1.Service) string { return backend.URL }})
		if err := k.Client.Create(ctx, newService(ns, "hello", image1)); err != nil {
			t.Fatal(err)
		}
		eventually(t, "Service ready", func() (bool, error) { return getSvc(t, k, ns, "hello").IsReady(), nil })
		svc := getSvc(t, k, ns, "hello")
		if svc.Status.LatestCreatedRevisionName != "hello-00001" || svc.Status.LatestReadyRevisionName != "hello-00001" {
			t.Errorf("revisions %q/%q", svc.Status.LatestCreatedRevisionName, svc.Status.LatestReadyRevisionName)
		}
		if svc.Status.URL.String() != backend.URL || svc.Status.Address.URL.String() != backend.URL {
			t.Errorf("url %v address %v, want %s", svc.Status.URL, svc.Status.Address.URL, backend.URL)
		}
		for _, c := range []apis.ConditionType{servingv1.ServiceConditionReady, servingv1.ServiceConditionConfigurationsReady, servingv1.ServiceConditionRoutesReady} {
			if !svc.Status.GetCondition(c).IsTrue() {
				t.Errorf("condition %s not True: %+v", c, svc.Status.GetCondition(c))
			}
		}
		resp, err := http.Get(svc.Status.Address.URL.String())
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()

		svc.Spec.Template.Name = "hello-custom"
		svc.Spec.Template.Spec.Containers[0].Image = image2
		if err := k.Client.Update(ctx, svc); err != nil {
			t.Fatal(err)
		}
		eventually(t, "second revision ready", func() (bool, error) {
			s := getSvc(t, k, ns, "hello")
			return s.IsReady() && s.Status.LatestReadyRevisionName == "hello-custom", nil
		})
		// Each revision is a Revision object of the Service with its image
		// digest resolved, as Knative's are.
		for name, image := range map[string]string{"hello-00001": image1, "hello-custom": image2} {
			rev := &servingv1.Revision{}
			if err := k.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, rev); err != nil {
				t.Fatalf("Revision %s: %v", name, err)
			}
			cs := rev.Status.ContainerStatuses
			if rev.Labels["serving.knative.dev/service"] != "hello" || len(cs) != 1 || cs[0].ImageDigest != image || !metav1.IsControlledBy(rev, svc) {
				t.Errorf("Revision %s: labels %v, containerStatuses %+v, owners %+v", name, rev.Labels, cs, rev.OwnerReferences)
			}
		}
	})

	t.Run("a tag resolves to a digest in the Revision", func(t *testing.T) {
		ns := k.Namespace(t)
		if err := k.Client.Create(ctx, newService(ns, "tagged", "registry.example:5000/team/app:v3")); err != nil {
			t.Fatal(err)
		}
		eventually(t, "Service ready", func() (bool, error) { return getSvc(t, k, ns, "tagged").IsReady(), nil })
		rev := &servingv1.Revision{}
		if err := k.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "tagged-00001"}, rev); err != nil {
			t.Fatal(err)
		}
		if cs := rev.Status.ContainerStatuses; len(cs) != 1 || cs[0].ImageDigest != testbed.ResolvedImage("registry.example:5000/team/app:v3") {
			t.Errorf("containerStatuses %+v", cs)
		}
	})

	t.Run("failed revision keeps the previous one serving", func(t *testing.T) {
		ns := k.Namespace(t)
		if err := k.Client.Create(ctx, newService(ns, "f", image1)); err != nil {
			t.Fatal(err)
		}
		eventually(t, "Service ready", func() (bool, error) { return getSvc(t, k, ns, "f").IsReady(), nil })
		if u := getSvc(t, k, ns, "f").Status.URL.String(); u != "http://f."+ns+".svc.cluster.local" {
			t.Errorf("default URL %q", u)
		}
		sim.SetPolicy(ns, testbed.ServePolicy{Mode: testbed.ServeFail, Reason: "RevisionFailed", Message: "Unable to fetch image \"" + image2 + "\""})
		svc := getSvc(t, k, ns, "f")
		svc.Spec.Template.Spec.Containers[0].Image = image2
		if err := k.Client.Update(ctx, svc); err != nil {
			t.Fatal(err)
		}
		eventually(t, "Service failed", func() (bool, error) { return getSvc(t, k, ns, "f").IsFailed(), nil })
		svc = getSvc(t, k, ns, "f")
		ready := svc.Status.GetCondition(servingv1.ServiceConditionReady)
		if ready.Reason != "RevisionFailed" || ready.Message != "Unable to fetch image \""+image2+"\"" {
			t.Errorf("Ready %+v", ready)
		}
		if svc.Status.LatestCreatedRevisionName != "f-00002" || svc.Status.LatestReadyRevisionName != "f-00001" {
			t.Errorf("revisions %q/%q", svc.Status.LatestCreatedRevisionName, svc.Status.LatestReadyRevisionName)
		}
		if !svc.Status.GetCondition(servingv1.ServiceConditionRoutesReady).IsTrue() {
			t.Error("routes not ready while the old revision serves")
		}
	})

	t.Run("holds until told", func(t *testing.T) {
		ns := k.Namespace(t)
		sim.SetPolicy(ns, testbed.ServePolicy{Mode: testbed.ServeHold})
		if err := k.Client.Create(ctx, newService(ns, "h", image1)); err != nil {
			t.Fatal(err)
		}
		eventually(t, "Service observed", func() (bool, error) {
			s := getSvc(t, k, ns, "h")
			return s.Status.ObservedGeneration == s.Generation, nil
		})
		svc := getSvc(t, k, ns, "h")
		if c := svc.Status.GetCondition(servingv1.ServiceConditionReady); !c.IsUnknown() || svc.Status.LatestCreatedRevisionName != "h-00001" || svc.Status.LatestReadyRevisionName != "" {
			t.Fatalf("deploying status %+v", svc.Status)
		}
		if err := sim.Fail(ctx, ns, "h", "", ""); err != nil {
			t.Fatal(err)
		}
		if c := getSvc(t, k, ns, "h").Status.GetCondition(servingv1.ServiceConditionRoutesReady); c.Reason != "RevisionMissing" {
			t.Errorf("RoutesReady %+v", c)
		}
		if err := sim.Ready(ctx, ns, "h"); err != nil {
			t.Fatal(err)
		}
		if !getSvc(t, k, ns, "h").IsReady() {
			t.Error("not Ready after Ready")
		}
	})
}

func TestResolvedImage(t *testing.T) {
	sum := func(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }
	for _, tc := range []struct{ in, want string }{
		{"registry.example/app@sha256:" + strings.Repeat("a", 64), "registry.example/app@sha256:" + strings.Repeat("a", 64)},
		{"registry.example/app:v1", "registry.example/app@sha256:" + sum("registry.example/app:v1")},
		{"registry.example:5000/app:v1", "registry.example:5000/app@sha256:" + sum("registry.example:5000/app:v1")},
		{"registry.example:5000/app", "registry.example:5000/app@sha256:" + sum("registry.example:5000/app:latest")},
		{"nginx", "nginx@sha256:" + sum("nginx:latest")},
	} {
		if got := testbed.ResolvedImage(tc.in); got != tc.want {
			t.Errorf("ResolvedImage(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if testbed.ResolvedImage("app:v1") == testbed.ResolvedImage("app:v2") {
		t.Error("two tags resolved to one digest")
	}
}

func TestKnativeSimulatorDelay(t *testing.T) {
	k := testbed.SharedKube(t)
	sim := testbed.SharedKnative(t)
	ns := k.Namespace(t)
	sim.SetPolicy(ns, testbed.ServePolicy{Delay: 300 * time.Millisecond})
	start := time.Now()
	if err := k.Client.Create(context.Background(), newService(ns, "d", image1)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "Service ready", func() (bool, error) { return getSvc(t, k, ns, "d").IsReady(), nil })
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("ready after %v, before the 300ms delay", d)
	}
}

// The simulator's apiserver refuses what Knative's webhook refuses: a
// changed revision template under the revision name in use. A new name, an
// unchanged template, an unnamed template and the Service's own metadata
// pass.
func TestKnativeRevisionNameRule(t *testing.T) {
	k := testbed.SharedKube(t)
	testbed.SharedKnative(t)
	ns := k.Namespace(t)
	ctx := context.Background()
	svc := &servingv1.Service{ObjectMeta: metav1.ObjectMeta{Name: "named", Namespace: ns}}
	svc.Spec.Template.Name = "named-00001"
	svc.Spec.Template.Spec.Containers = []corev1.Container{{Image: "registry.example/app@sha256:" + strings.Repeat("a", 64)}}
	if err := k.Client.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		change func(*servingv1.Service)
		refuse bool
	}{
		{"changed template, same name", func(s *servingv1.Service) {
			s.Spec.Template.Spec.Containers[0].Image = "registry.example/app@sha256:" + strings.Repeat("b", 64)
		}, true},
		{"changed template annotation, same name", func(s *servingv1.Service) {
			s.Spec.Template.Annotations = map[string]string{"autoscaling.knative.dev/min-scale": "1"}
		}, true},
		{"Service label only", func(s *servingv1.Service) { s.Labels = map[string]string{"team": "a"} }, false},
		{"changed template, new name", func(s *servingv1.Service) {
			s.Spec.Template.Name = "named-00002"
			s.Spec.Template.Spec.Containers[0].Image = "registry.example/app@sha256:" + strings.Repeat("c", 64)
		}, false},
		{"changed template, no name", func(s *servingv1.Service) {
			s.Spec.Template.Name = ""
			s.Spec.Template.Spec.Containers[0].Image = "registry.example/app@sha256:" + strings.Repeat("d", 64)
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The simulator writes the status meanwhile: an update that
			// loses that race is made again on the new version.
			var err error
			for i := 0; i == 0 || apierrors.IsConflict(err) && i < 20; i++ {
				cur := &servingv1.Service{}
				if err := k.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "named"}, cur); err != nil {
					t.Fatal(err)
				}
				tc.change(cur)
				err = k.Client.Update(ctx, cur, client.DryRunAll)
			}
			switch {
			case tc.refuse && (err == nil || !strings.Contains(err.Error(), testbed.KnativeNameChangeMessage)):
				t.Errorf("update accepted or refused otherwise: %v", err)
			case !tc.refuse && err != nil:
				t.Errorf("update refused: %v", err)
			}
		})
	}
}

// TestKnativeSimulatorTraffic: spec.traffic is routed as Knative's Route
// routes it, each case from a Service with two ready revisions (s-00001,
// then s-00002 the latest).
func TestKnativeSimulatorTraffic(t *testing.T) {
	k := testbed.SharedKube(t)
	testbed.SharedKnative(t)
	ctx := context.Background()
	pct := ptr.To[int64]
	yes, no := ptr.To(true), ptr.To(false)
	tests := []struct {
		name    string
		traffic []servingv1.TrafficTarget
		// want is status.traffic with tag URLs by tag; nil: as before.
		want       []servingv1.TrafficTarget
		routes     corev1.ConditionStatus
		reason     string
		messageHas string
	}{{
		name:    "split with tags, latest resolved",
		traffic: []servingv1.TrafficTarget{{RevisionName: "s-00001", Percent: pct(40), Tag: "old"}, {LatestRevision: yes, Percent: pct(60), Tag: "new"}},
		want: []servingv1.TrafficTarget{
			{RevisionName: "s-00001", LatestRevision: no, Percent: pct(40), Tag: "old"},
			{RevisionName: "s-00002", LatestRevision: yes, Percent: pct(60), Tag: "new"}},
		routes: corev1.ConditionTrue,
	}, {
		name:    "latest untagged beside a tag at 0 percent",
		traffic: []servingv1.TrafficTarget{{RevisionName: "s-00001", Percent: pct(100)}, {LatestRevision: yes, Percent: pct(0), Tag: "next"}},
		want: []servingv1.TrafficTarget{
			{RevisionName: "s-00001", LatestRevision: no, Percent: pct(100)},
			{RevisionName: "s-00002", LatestRevision: yes, Percent: pct(0), Tag: "next"}},
		routes: corev1.ConditionTrue,
	}, {
		name:       "a revision that does not exist",
		traffic:    []servingv1.TrafficTarget{{RevisionName: "s-00009", Percent: pct(100)}},
		routes:     corev1.ConditionFalse,
		reason:     "RevisionMissing",
		messageHas: `Revision "s-00009" referenced in traffic not found.`,
	}, {
		name:    "targets of one revision merge, and the Service waits",
		traffic: []servingv1.TrafficTarget{{RevisionName: "s-00002", Percent: pct(50)}, {LatestRevision: yes, Percent: pct(50)}, {RevisionName: "s-00002", Percent: pct(0)}},
		want: []servingv1.TrafficTarget{
			{RevisionName: "s-00002", LatestRevision: no, Percent: pct(50)},
			{RevisionName: "s-00002", LatestRevision: yes, Percent: pct(50)}},
		routes: corev1.ConditionUnknown,
		reason: "TrafficNotMigrated",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ns := k.Namespace(t)
			if err := k.Client.Create(ctx, newService(ns, "s", image1)); err != nil {
				t.Fatal(err)
			}
			eventually(t, "first revision ready", func() (bool, error) { return getSvc(t, k, ns, "s").IsReady(), nil })
			svc := getSvc(t, k, ns, "s")
			svc.Spec.Template.Spec.Containers[0].Image = image2
			if err := k.Client.Update(ctx, svc); err != nil {
				t.Fatal(err)
			}
			eventually(t, "second revision ready", func() (bool, error) {
				s := getSvc(t, k, ns, "s")
				return s.IsReady() && s.Status.LatestReadyRevisionName == "s-00002", nil
			})
			before := getSvc(t, k, ns, "s")
			before.Spec.Traffic = tc.traffic
			if err := k.Client.Update(ctx, before); err != nil {
				t.Fatal(err)
			}
			var got *servingv1.Service
			eventually(t, "traffic routed", func() (bool, error) {
				got = getSvc(t, k, ns, "s")
				return got.Status.ObservedGeneration == got.Generation && got.Status.GetCondition(servingv1.ServiceConditionRoutesReady).Status == tc.routes, nil
			})
			if got.Status.LatestCreatedRevisionName != "s-00002" {
				t.Errorf("a traffic change made revision %s", got.Status.LatestCreatedRevisionName)
			}
			c := got.Status.GetCondition(servingv1.ServiceConditionRoutesReady)
			if c.Reason != tc.reason || !strings.Contains(c.Message, tc.messageHas) {
				t.Errorf("RoutesReady %+v, want reason %q, message with %q", c, tc.reason, tc.messageHas)
			}
			want := tc.want
			if want == nil {
				want = before.Status.Traffic
			}
			for i := range want {
				if want[i].Tag != "" && want[i].URL == nil {
					want[i].URL = apis.HTTP(want[i].Tag + "-s." + ns + ".svc.cluster.local")
				}
			}
			if d := cmp.Diff(want, got.Status.Traffic); d != "" {
				t.Errorf("status.traffic (-want +got):\n%s", d)
			}
			rev := &servingv1.Revision{}
			if err := k.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "s-00001"}, rev); err != nil || !rev.IsReady() {
				t.Errorf("Revision s-00001 not Ready: %v %+v", err, rev.Status.Conditions)
			}
		})
	}
}
