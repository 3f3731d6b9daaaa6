package runs

import (
	"context"
	"log/slog"
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

// A FunctionJob run of a function with placement is told, as its serving
// revision is, that local mode ignores it: on a cluster the Job's pod
// carries it.
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
		warn  bool
	}{
		{"placed", func(fn *slessv1alpha1.Function) { fn.Spec.NodeSelector = map[string]string{"disktype": "ssd"} }, true},
		{"anywhere", func(*slessv1alpha1.Function) {}, false},
	} {
		fn := localtest.Function("ns", c.name)
		c.place(fn)
		rig.serve(ctx, t, fn, "def handler(event, context):\n    return 1\n")
		fj := &slessv1alpha1.FunctionJob{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: c.name + "-job"},
			Spec: slessv1alpha1.FunctionJobSpec{Function: c.name, RunID: 1}}
		if _, err := (*localJobs)(rig.runs).StartRun(ctx, adapter.RunRequest{Job: fj, Function: fn, RequestID: "req-" + c.name}); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		warned := false
		for _, line := range strings.Split(logs.String(), "\n") {
			if strings.Contains(line, serving.PlacementIgnored) && strings.Contains(line, `"functionjob":"ns/`+c.name+`-job"`) {
				warned = true
			}
		}
		if warned != c.warn {
			t.Errorf("%s: a job run warned of placement: %v, want %v; logs:\n%s", c.name, warned, c.warn, logs.String())
		}
	}
}
