package cluster_test

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/test/testbed"
)

// TestPrinterColumnsSayWhy reads `kubectl get -o wide` as an operator does,
// in the phases where READY alone says nothing useful: a Failed Function, a
// Trigger that does not call, a FunctionJob that waits or failed. A REASON
// column names why, from the conditions the reconcilers write (their
// statuses are written here directly, as the reconcilers would).
func TestPrinterColumnsSayWhy(t *testing.T) {
	kube := testbed.SharedKube(t)
	ns := kube.Namespace(t)
	ctx := context.Background()
	cond := func(typ string, s metav1.ConditionStatus, reason string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: s, Reason: reason, Message: "m", LastTransitionTime: metav1.Now()}
	}
	fn := func(name string) *slessv1alpha1.Function {
		return &slessv1alpha1.Function{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: slessv1alpha1.FunctionSpec{
			WorkloadSpec: slessv1alpha1.WorkloadSpec{
				Runtime:    "python3.12",
				Entrypoint: "main.handler",
				Source:     slessv1alpha1.FunctionSource{Inline: &slessv1alpha1.InlineSource{Files: map[string]string{"main.py": "x"}}},
			},
		}}
	}
	trg := func(name string) *slessv1alpha1.Trigger {
		return &slessv1alpha1.Trigger{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: slessv1alpha1.TriggerSpec{Function: "report", Type: slessv1alpha1.TriggerTypeCron, Schedule: "@daily"}}
	}
	job := func(name string) *slessv1alpha1.FunctionJob {
		return &slessv1alpha1.FunctionJob{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: slessv1alpha1.FunctionJobSpec{Function: "report", RunID: 1}}
	}

	for _, tc := range []struct {
		name     string
		resource string
		obj      client.Object
		status   func(client.Object)
		// reason is the REASON cell, empty when there is nothing to say.
		reason string
	}{{
		name: "Function whose Knative Service is refused", resource: "functions", obj: fn("refused"),
		status: func(o client.Object) {
			o.(*slessv1alpha1.Function).Status = slessv1alpha1.FunctionStatus{Phase: slessv1alpha1.FunctionPhaseFailed, Conditions: []metav1.Condition{
				cond("ServiceReady", metav1.ConditionFalse, "ServiceRejected"), cond("Ready", metav1.ConditionFalse, "ServiceRejected")}}
		},
		reason: "ServiceRejected",
	}, {
		name: "Function building", resource: "functions", obj: fn("building"),
		status: func(o client.Object) {
			o.(*slessv1alpha1.Function).Status = slessv1alpha1.FunctionStatus{Phase: slessv1alpha1.FunctionPhaseBuilding, Conditions: []metav1.Condition{
				cond("BuildSucceeded", metav1.ConditionUnknown, "Building"), cond("Ready", metav1.ConditionUnknown, "Building")}}
		},
		reason: "Building",
	}, {
		name: "Trigger of a missing Function", resource: "triggers", obj: trg("orphan"),
		status: func(o client.Object) {
			o.(*slessv1alpha1.Trigger).Status.Conditions = []metav1.Condition{cond("Ready", metav1.ConditionFalse, "FunctionNotFound")}
		},
		reason: "FunctionNotFound",
	}, {
		name: "Trigger that calls", resource: "triggers", obj: trg("calls"),
		status: func(o client.Object) {
			o.(*slessv1alpha1.Trigger).Status.Conditions = []metav1.Condition{cond("Ready", metav1.ConditionTrue, "Scheduled")}
		},
		reason: "Scheduled",
	}, {
		name: "FunctionJob waiting for a build", resource: "functionjobs", obj: job("waits"),
		status: func(o client.Object) {
			o.(*slessv1alpha1.FunctionJob).Status = slessv1alpha1.FunctionJobStatus{Phase: slessv1alpha1.JobPhasePending,
				Conditions: []metav1.Condition{cond("Ready", metav1.ConditionFalse, "FunctionNotBuilt")}}
		},
		reason: "FunctionNotBuilt",
	}, {
		name: "FunctionJob running", resource: "functionjobs", obj: job("runs"),
		status: func(o client.Object) {
			o.(*slessv1alpha1.FunctionJob).Status = slessv1alpha1.FunctionJobStatus{Phase: slessv1alpha1.JobPhaseRunning, Conditions: []metav1.Condition{
				cond("Ready", metav1.ConditionTrue, "JobCreated"), cond("Complete", metav1.ConditionUnknown, "Running")}}
		},
		reason: "Running",
	}, {
		name: "FunctionJob past its deadline", resource: "functionjobs", obj: job("late"),
		status: func(o client.Object) {
			o.(*slessv1alpha1.FunctionJob).Status = slessv1alpha1.FunctionJobStatus{Phase: slessv1alpha1.JobPhaseFailed, Conditions: []metav1.Condition{
				cond("Ready", metav1.ConditionTrue, "JobCreated"), cond("Complete", metav1.ConditionFalse, "DeadlineExceeded")}}
		},
		reason: "DeadlineExceeded",
	}, {
		name: "FunctionJob that succeeded", resource: "functionjobs", obj: job("done"),
		status: func(o client.Object) {
			o.(*slessv1alpha1.FunctionJob).Status = slessv1alpha1.FunctionJobStatus{Phase: slessv1alpha1.JobPhaseSucceeded, Conditions: []metav1.Condition{
				cond("Ready", metav1.ConditionTrue, "JobCreated"), cond("Complete", metav1.ConditionTrue, "Succeeded")}}
		},
		reason: "",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if err := kube.Client.Create(ctx, tc.obj); err != nil {
				t.Fatal(err)
			}
			tc.status(tc.obj)
			if err := kube.Client.Status().Update(ctx, tc.obj); err != nil {
				t.Fatal(err)
			}
			var out, errOut bytes.Buffer
			cmd := exec.Command(testbed.Kubectl(t), "--kubeconfig", kube.Kubeconfig, "get", tc.resource, tc.obj.GetName(), "-n", ns, "-o", "wide")
			cmd.Stdout, cmd.Stderr = &out, &errOut
			if err := cmd.Run(); err != nil {
				t.Fatalf("kubectl get: %v\n%s", err, errOut.String())
			}
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			if len(lines) != 2 {
				t.Fatalf("kubectl get printed %q", out.String())
			}
			// Columns are aligned, so a cell starts where its header does.
			at := strings.Index(lines[0], "REASON")
			if at < 0 {
				t.Fatalf("no REASON column:\n%s", out.String())
			}
			end := len(lines[0])
			if next := strings.IndexFunc(lines[0][at+len("REASON"):], func(r rune) bool { return r != ' ' }); next >= 0 {
				end = at + len("REASON") + next
			}
			cell := strings.TrimSpace(lines[1][at:min(end, len(lines[1]))])
			if cell != tc.reason {
				t.Errorf("REASON = %q, want %q\n%s", cell, tc.reason, out.String())
			}
		})
	}
}
