package adapter

import (
	"context"
	"time"

	"github.com/robfig/cron/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
)

// Scheduler carries out cron triggers' runs.
type Scheduler interface {
	// Schedule makes t's runs follow sched while t is enabled (and none
	// while it is not), and returns when it last ran one and when to look
	// again.
	Schedule(ctx context.Context, t *slessv1alpha1.Trigger, fn *slessv1alpha1.Function, sched cron.Schedule) (last *metav1.Time, after time.Duration, err error)
}

// ConsumerState is where a queue trigger's consumer stands.
type ConsumerState struct {
	// Status is True while it consumes, Unknown while it starts, False
	// when something keeps it from consuming; Message says what.
	Status  metav1.ConditionStatus
	Message string
	// Mark, when set, marks what keeps this mode from consuming at all (a
	// missing connection Secret, no broker) in place of Status.
	Mark func(*slessv1alpha1.TriggerStatus)
}

// Consumer carries out queue triggers.
type Consumer interface {
	// Consume makes t's queue consumed while t is enabled (and not while
	// it is not), and returns where the consumer stands and when to look
	// again.
	Consume(ctx context.Context, t *slessv1alpha1.Trigger, fn *slessv1alpha1.Function) (ConsumerState, time.Duration, error)
}

// Carrier carries out the calls of triggers in one mode; the Trigger
// reconciler (pkg/reconciler/trigger) decides and writes status through it.
type Carrier interface {
	Scheduler
	Consumer
	// Tidy stops and removes what a trigger of another type would have
	// (a trigger's type may change).
	Tidy(ctx context.Context, t *slessv1alpha1.Trigger) error
	// Pause stops t's calls while it stays as it is: its function is
	// missing, its schedule or payload cannot be used.
	Pause(ctx context.Context, t *slessv1alpha1.Trigger) error
	// Unsupported marks t not Ready and says true when this mode cannot
	// carry out t's type at all.
	Unsupported(t *slessv1alpha1.Trigger) bool
	// URL is where an enabled http trigger makes fn public.
	URL(t *slessv1alpha1.Trigger, fn *slessv1alpha1.Function) string
	// Finalize lets go of what t held, once t is being deleted; Gone once
	// it is.
	Finalize(ctx context.Context, t *slessv1alpha1.Trigger) error
	Gone(key types.NamespacedName)
}

// TokenIssuer mints the credential a trigger's caller (`sless cron-call`,
// `sless consume`) presents to the invoke proxy.
type TokenIssuer interface {
	IssueTriggerToken(t *slessv1alpha1.Trigger) (token string, expires time.Time, err error)
}

// MinScaleSetter raises and restores the minimum instance count of a
// function's service on behalf of a holder (a cron trigger pre-warming it).
// Several holders may hold one function at once; its own minimum comes back
// only when the last one restores. Both calls are idempotent.
type MinScaleSetter interface {
	// RaiseMinScale keeps at least one instance of the function running
	// while holder holds it. A function with no service yet is left alone.
	RaiseMinScale(ctx context.Context, namespace, function, holder string) error
	// RestoreMinScale drops holder's hold; without holds the service's
	// minimum is what it was before the first hold.
	RestoreMinScale(ctx context.Context, namespace, function, holder string) error
}
