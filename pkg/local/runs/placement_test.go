package runs

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sless-dev/sless/pkg/adapter"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/local/localtest"
	"github.com/sless-dev/sless/pkg/local/serving"
	"github.com/sless-dev/sless/test/testbed"
)

// A FunctionJob run of a function with placement or limited egress is
// told, as its serving revision is, that local mode ignores them: on a
// cluster the Job's pod carries them.
func TestJobRunWarnsOfPlacement(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var logs testbed.SyncBuffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	rig := newRunsRig(t, serving.ServerOptions{IdleTimeout: time.Minute, Logger: log})
	rig.runs.Logger = log
	for _, c := range []struct {
		name  string
		place func(*slessv1alpha1.Function)
		warn  string
	}{
		{"placed", func(fn *slessv1alpha1.Function) { fn.Spec.NodeSelector = map[string]string{"disktype": "ssd"} }, serving.PlacementIgnored},
		{"walled", func(fn *slessv1alpha1.Function) {
			fn.Spec.Network = &slessv1alpha1.NetworkSpec{Egress: slessv1alpha1.EgressNone}
		}, serving.EgressIgnored},
		{"open", func(fn *slessv1alpha1.Function) {
			fn.Spec.Network = &slessv1alpha1.NetworkSpec{Egress: slessv1alpha1.EgressAll}
		}, ""},
		{"anywhere", func(*slessv1alpha1.Function) {}, ""},
	} {
		fn := localtest.Function("ns", c.name)
		c.place(fn)
		rig.serve(ctx, t, fn, "def handler(event, context):\n    return 1\n")
		fj := &slessv1alpha1.FunctionJob{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: c.name + "-job"},
			Spec: slessv1alpha1.FunctionJobSpec{Function: c.name, RunID: 1}}
		if _, err := (*localJobs)(rig.runs).StartRun(ctx, adapter.RunRequest{Job: fj, Function: fn, RequestID: "req-" + c.name}); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var warned []string
		for _, line := range strings.Split(logs.String(), "\n") {
			for _, w := range []string{serving.PlacementIgnored, serving.EgressIgnored} {
				if strings.Contains(line, w) && strings.Contains(line, `"functionjob":"ns/`+c.name+`-job"`) {
					warned = append(warned, w)
				}
			}
		}
		if want := []string{c.warn}; (c.warn == "" && len(warned) > 0) || (c.warn != "" && !slices.Equal(warned, want)) {
			t.Errorf("%s: a job run warned %q, want %q; logs:\n%s", c.name, warned, c.warn, logs.String())
		}
	}
}
