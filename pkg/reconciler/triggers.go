package reconciler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/sless-dev/sless/pkg/adapter"
	"github.com/sless-dev/sless/pkg/adapter/kube"
	"github.com/sless-dev/sless/pkg/adapter/postgres"
	"github.com/sless-dev/sless/pkg/adapter/s3"
	"github.com/sless-dev/sless/pkg/auth/triggertoken"
	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/reconciler/job"
	"github.com/sless-dev/sless/pkg/reconciler/trigger"
	"github.com/sless-dev/sless/pkg/sourcegc"
)

// TriggerOptions configure the Trigger and FunctionJob reconcilers.
type TriggerOptions struct {
	// Image is the sless image (pinned by digest) cron runs and queue
	// consumers run.
	Image string
	// InvokeURL is the invoke proxy's base URL as pods reach it.
	InvokeURL string
	// JWTSecretFile holds the HS256 secret trigger credentials are signed
	// with; without one, cron and queue triggers get no credential.
	JWTSecretFile    string
	Issuer, Audience string
	// JobTTLSeconds is how long finished FunctionJob runs keep their Job.
	JobTTLSeconds int
	// DatabaseURL, when set, records FunctionJob runs in the invocation history.
	DatabaseURL string
	// Concurrency is how many Triggers and FunctionJobs are reconciled at once, each.
	Concurrency int
	// ConsumerEnv is added to every queue consumer's environment (the
	// controller's OTEL_* variables).
	ConsumerEnv []corev1.EnvVar
}

// TriggerCaches narrows the kinds the two reconcilers watch: Pods of
// FunctionJob runs, Secrets of trigger credentials. (They watch different
// kinds, so the entries do not collide.) A manager given to
// TriggerOptions.SetupWithManager needs them in its cache options.
func TriggerCaches() map[client.Object]cache.ByObject {
	byObject := map[client.Object]cache.ByObject{}
	for o, b := range job.CacheByObject() {
		byObject[o] = b
	}
	for o, b := range trigger.CacheByObject() {
		byObject[o] = b
	}
	return byObject
}

// SetupWithManager registers the Trigger and FunctionJob reconcilers with
// mgr, as `sless controller` does (tests beside a real node run them so).
func (t TriggerOptions) SetupWithManager(ctx context.Context, mgr ctrl.Manager, publicURL string, log *slog.Logger) error {
	if t.JobTTLSeconds < 1 {
		return fmt.Errorf("--job-ttl-seconds must be positive, got %d", t.JobTTLSeconds)
	}
	if t.Image == "" {
		log.Warn("--sless-image (SLESS_IMAGE) is not set: cron and queue triggers stay not Ready")
	} else if !adapter.Pinned(t.Image) {
		log.Warn("--sless-image is not pinned by digest; cron runs and consumers may run different sless versions", "image", t.Image)
	}
	topts := trigger.Options{
		Config:                  kube.TriggerConfig{Image: t.Image, InvokeURL: t.InvokeURL, ImagePullPolicy: corev1.PullIfNotPresent, ConsumerEnv: t.ConsumerEnv},
		PublicURL:               publicURL,
		MaxConcurrentReconciles: t.Concurrency,
	}
	if t.JWTSecretFile != "" {
		b, err := os.ReadFile(t.JWTSecretFile)
		if err != nil {
			return fmt.Errorf("--jwt-secret-file: %w", err)
		}
		topts.Tokens = &triggertoken.HS256{Secret: []byte(strings.TrimSpace(string(b))), Issuer: t.Issuer, Audience: t.Audience}
	} else {
		log.Warn("--jwt-secret-file (SLESS_JWT_SECRET_FILE) is not set: cron and queue triggers get no credential and stay not Ready")
	}
	if err := trigger.SetupWithManager(mgr, topts); err != nil {
		return err
	}
	jopts := job.Options{Config: kube.JobConfig{TTLSecondsAfterFinished: int32(t.JobTTLSeconds)}, MaxConcurrentReconciles: t.Concurrency}
	if t.DatabaseURL != "" {
		rec, err := startJobRecorder(ctx, t.DatabaseURL, log)
		if err != nil {
			return err
		}
		jopts.Recorder = rec
	}
	return job.SetupWithManager(mgr, jopts)
}

// startJobRecorder records FunctionJob runs in PostgreSQL until ctx is
// done, then flushes what is queued.
func startJobRecorder(ctx context.Context, databaseURL string, log *slog.Logger) (jobRecorder, error) {
	// Retention is sless api's: 0 here.
	pg, err := postgres.Start(ctx, databaseURL, 0, log)
	if err != nil {
		return jobRecorder{}, err
	}
	// The recorder's series join the controller's on its /metrics.
	rmetrics, err := invoke.NewRecorderMetrics(ctrlmetrics.Registry)
	if err != nil {
		pg.Close()
		return jobRecorder{}, err
	}
	rec := invoke.NewRecorder(pg, invoke.RecorderOptions{Logger: log, Metrics: rmetrics})
	go func() {
		<-ctx.Done()
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := rec.Close(cctx); err != nil && !errors.Is(err, context.Canceled) {
			log.Warn("invocation records not flushed", "error", err)
		}
		pg.Close()
	}()
	return jobRecorder{rec}, nil
}

// jobRecorder records FunctionJob runs in the invocation history.
type jobRecorder struct{ r *invoke.Recorder }

func (j jobRecorder) RecordRun(run job.Run) {
	j.r.Record(invoke.Record{
		Namespace: run.Namespace, Function: run.Function, Revision: run.Revision, Trigger: invoke.TriggerJob,
		RequestID: run.RequestID, StartedAt: run.Started, Duration: run.Duration, Status: run.Status, Error: run.Error,
	})
}

// addSourceGC runs the sweep for source objects no Function needs on the
// leader. It reads Functions from the apiserver, not the cache: a create
// naming an upload must not be missed for a cache that lags.
func addSourceGC(mgr ctrl.Manager, store *s3.Client, grace, interval time.Duration) error {
	metrics, err := sourcegc.NewMetrics(ctrlmetrics.Registry)
	if err != nil {
		return err
	}
	gc, err := sourcegc.New(sourcegc.Options{
		Store: store, Objects: mgr.GetAPIReader(), Grace: grace, Interval: interval,
		Metrics: metrics, Logger: slog.New(slog.NewJSONHandler(os.Stderr, nil)),
	})
	if err != nil {
		return err
	}
	return mgr.Add(gc)
}
