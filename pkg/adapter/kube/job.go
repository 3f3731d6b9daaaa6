package kube

import (
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/sless-dev/sless/pkg/adapter"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/names"
)

// MakeJob builds the batch Job of one FunctionJob run; it is pure: no
// client, no clock. Labels on the Job and its Pods:
const (
	LabelFunction    = "sless.dev/function"
	LabelFunctionJob = "sless.dev/function-job"
	LabelRunID       = "sless.dev/run-id"
	LabelManagedBy   = "app.kubernetes.io/managed-by"
	ManagedBy        = "sless"
	// AnnotationRevision on a run's Job names the function revision whose
	// image it runs, for the invocation record.
	AnnotationRevision = "sless.dev/revision"
	// ContainerName is the function's container in the run's Pod.
	ContainerName = "function"
	// TerminationMessagePath is where the runtime's job mode writes the result.
	TerminationMessagePath = "/dev/termination-log"
)

// Defaults of JobConfig.
const (
	DefaultTTLSecondsAfterFinished = 3600
	// StartupAllowanceSeconds is added to the run's timeout for
	// activeDeadlineSeconds: the deadline counts from the Job's start, which
	// includes scheduling, the image pull and the runtime's start before the
	// handler's own budget begins.
	StartupAllowanceSeconds = 60
	// runtimeUID is the user the runtime images run as.
	runtimeUID = 65532
)

// JobConfig is what MakeJob needs beyond the FunctionJob and its Function.
type JobConfig struct {
	// TTLSecondsAfterFinished: finished Jobs (and their Pods) are deleted this
	// long after they end; the run's result is in the FunctionJob's status by then.
	TTLSecondsAfterFinished int32
}

// JobLabels are the labels of the Job and Pods of run runID.
func JobLabels(j *slessv1alpha1.FunctionJob, runID int64) map[string]string {
	return map[string]string{
		LabelFunction:    j.Spec.Function,
		LabelFunctionJob: j.Name,
		LabelRunID:       strconv.FormatInt(runID, 10),
		LabelManagedBy:   ManagedBy,
	}
}

// MakeJob builds the Job of the FunctionJob's current run: the image of the
// function's serving revision (status.servingImage, digest-pinned), in the
// runtime's job mode, which calls the handler once with the payload and
// writes the result to the termination message. That is the code calls
// reach: not status.image while a newer revision deploys or after it
// failed. For the same reason the env, resources and default timeout are
// rev's, the settings of that revision, not fn's spec, which may describe
// the newer one. A run is never retried (backoffLimit 0): a new run is a
// new runID. fn must be Runnable.
func MakeJob(j *slessv1alpha1.FunctionJob, fn *slessv1alpha1.Function, rev adapter.RevisionSettings, cfg JobConfig) *batchv1.Job {
	runID := j.Spec.RunID
	timeout := j.RunTimeout(rev.TimeoutSeconds)
	ttl := cfg.TTLSecondsAfterFinished
	if ttl <= 0 {
		ttl = DefaultTTLSecondsAfterFinished
	}
	var env []corev1.EnvVar
	for _, e := range rev.Env {
		env = append(env, *e.DeepCopy())
	}
	env = append(env,
		corev1.EnvVar{Name: "SLESS_MODE", Value: "job"},
		corev1.EnvVar{Name: "SLESS_PAYLOAD", Value: payloadJSON(j)},
		corev1.EnvVar{Name: "SLESS_TERMINATION_MESSAGE_PATH", Value: TerminationMessagePath},
		corev1.EnvVar{Name: "SLESS_TIMEOUT_SECONDS", Value: strconv.Itoa(int(timeout))},
		corev1.EnvVar{Name: "SLESS_FUNCTION_NAME", Value: fn.Name},
		corev1.EnvVar{Name: "SLESS_NAMESPACE", Value: fn.Namespace},
		corev1.EnvVar{Name: "SLESS_REVISION", Value: fn.Status.LatestReadyRevision},
		corev1.EnvVar{Name: "SLESS_REQUEST_ID", Value: j.RunRequestID(runID)},
	)
	if rev.Entrypoint != "" {
		// As the revision's pods have it: a prebuilt image may not carry
		// the handler's name itself.
		env = append(env, corev1.EnvVar{Name: "SLESS_ENTRYPOINT", Value: rev.Entrypoint})
	}
	res := *rev.Resources.DeepCopy()
	labels := JobLabels(j, runID)
	// A run is placed where the revision's pods are.
	place := rev.Placement.DeepCopy()
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name:            names.Job(j, runID),
			Namespace:       j.Namespace,
			Labels:          labels,
			Annotations:     map[string]string{AnnotationRevision: fn.Status.LatestReadyRevision},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(j, slessv1alpha1.SchemeGroupVersion.WithKind("FunctionJob"))},
		},
		Spec: batchv1.JobSpec{
			BackoffLimit:            ptr.To[int32](0),
			ActiveDeadlineSeconds:   ptr.To(int64(timeout) + StartupAllowanceSeconds),
			TTLSecondsAfterFinished: ptr.To(ttl),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					RestartPolicy:                 corev1.RestartPolicyNever,
					NodeSelector:                  place.NodeSelector,
					Tolerations:                   place.Tolerations,
					Affinity:                      place.Affinity,
					PriorityClassName:             place.PriorityClassName,
					RuntimeClassName:              place.RuntimeClassName,
					AutomountServiceAccountToken:  ptr.To(false),
					EnableServiceLinks:            ptr.To(false),
					TerminationGracePeriodSeconds: ptr.To[int64](10),
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot:   ptr.To(true),
						RunAsUser:      ptr.To[int64](runtimeUID),
						RunAsGroup:     ptr.To[int64](runtimeUID),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					Containers: []corev1.Container{{
						Name:      ContainerName,
						Image:     fn.Status.ServingImage,
						Env:       env,
						Resources: res,
						SecurityContext: &corev1.SecurityContext{
							AllowPrivilegeEscalation: ptr.To(false),
							Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
						},
						TerminationMessagePath: TerminationMessagePath,
						// The result is the file; a runtime that died before
						// writing it leaves the tail of its log instead, which
						// says why.
						TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
					}},
				},
			},
		},
	}
}

// payloadJSON is the run's payload as compact JSON; null when unset, which
// the runtime hands to the handler as a null body.
func payloadJSON(j *slessv1alpha1.FunctionJob) string {
	if p := PayloadJSON(j.Spec.Payload); p != "" {
		return p
	}
	return "null"
}
