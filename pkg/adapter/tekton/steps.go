package tekton

import (
	"context"
	"fmt"

	tektonv1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sless-dev/sless/pkg/adapter"
)

var _ adapter.StepReader = (*Builder)(nil)

// BuildSteps reads the steps of PipelineRun namespace/name from its
// TaskRuns: each terminated step with the times its container reported.
func (b *Builder) BuildSteps(ctx context.Context, namespace, name string) ([]adapter.BuildStep, error) {
	pr := &tektonv1.PipelineRun{}
	if err := b.Client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, pr); err != nil {
		return nil, fmt.Errorf("read PipelineRun %s/%s: %w", namespace, name, err)
	}
	var steps []adapter.BuildStep
	for _, ref := range pr.Status.ChildReferences {
		if ref.Kind != "TaskRun" {
			continue
		}
		tr := &tektonv1.TaskRun{}
		if err := b.Client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: ref.Name}, tr); err != nil {
			return steps, fmt.Errorf("read TaskRun %s/%s: %w", namespace, ref.Name, err)
		}
		for _, s := range tr.Status.Steps {
			t := s.Terminated
			if t == nil || t.StartedAt.IsZero() {
				continue
			}
			steps = append(steps, adapter.BuildStep{Name: s.Name, Start: t.StartedAt.Time, End: t.FinishedAt.Time, Failed: t.ExitCode != 0})
		}
	}
	return steps, nil
}
