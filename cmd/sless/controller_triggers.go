package main

import (
	"context"
	"errors"
	"flag"
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
	"github.com/sless-dev/sless/pkg/adapter/postgres"
	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/reconciler/job"
	jobresources "github.com/sless-dev/sless/pkg/reconciler/job/resources"
	"github.com/sless-dev/sless/pkg/reconciler/trigger"
	triggerresources "github.com/sless-dev/sless/pkg/reconciler/trigger/resources"
)

// The Trigger and FunctionJob reconcilers join `sless controller` here.
func init() { controllerPlugins = append(controllerPlugins, triggersPlugin) }

func triggersPlugin(fs *flag.FlagSet) ControllerSetup {
	image := fs.String("sless-image", os.Getenv("SLESS_IMAGE"), "the sless image (pinned by digest) cron runs and queue consumers run; its entrypoint is the sless binary")
	invokeURL := fs.String("invoke-url", envOr("SLESS_INVOKE_URL", "http://sless-api.sless-system.svc"), "the invoke proxy's base URL as pods in the cluster reach it")
	secretFile := fs.String("jwt-secret-file", os.Getenv("SLESS_JWT_SECRET_FILE"), "file holding the HS256 secret trigger credentials are signed with (the API's --jwt-secret-file)")
	issuer := fs.String("jwt-issuer", os.Getenv("SLESS_JWT_ISSUER"), "iss of trigger credentials (what the API requires)")
	audience := fs.String("jwt-audience", os.Getenv("SLESS_JWT_AUDIENCE"), "aud of trigger credentials (one of the API's accepted values)")
	jobTTL := fs.Int("job-ttl-seconds", jobresources.DefaultTTLSecondsAfterFinished, "how long finished FunctionJob runs keep their Job and Pod")
	databaseURL := fs.String("database-url", os.Getenv("SLESS_DATABASE_URL"), "PostgreSQL URL for invocation records of FunctionJob runs (none: not recorded)")
	workers := fs.Int("trigger-concurrency", 2, "Triggers and FunctionJobs reconciled at once, each")

	byObject := map[client.Object]cache.ByObject{}
	// Both reconcilers narrow a kind: Pods of FunctionJob runs, Secrets of
	// trigger credentials. (They watch different kinds, so the entries do not collide.)
	for o, b := range job.CacheByObject() {
		byObject[o] = b
	}
	for o, b := range trigger.CacheByObject() {
		byObject[o] = b
	}
	return ControllerSetup{
		CacheByObject: byObject,
		Env:           []string{"job-ttl-seconds", "SLESS_JOB_TTL_SECONDS", "trigger-concurrency", "SLESS_TRIGGER_CONCURRENCY"},
		Setup: func(ctx context.Context, mgr ctrl.Manager) error {
			log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
			if *jobTTL < 1 {
				return fmt.Errorf("--job-ttl-seconds must be positive, got %d", *jobTTL)
			}
			if *image == "" {
				log.Warn("--sless-image (SLESS_IMAGE) is not set: cron and queue triggers stay not Ready")
			} else if !adapter.Pinned(*image) {
				log.Warn("--sless-image is not pinned by digest; cron runs and consumers may run different sless versions", "image", *image)
			}
			var tokens *trigger.HS256Tokens
			if *secretFile != "" {
				b, err := os.ReadFile(*secretFile)
				if err != nil {
					return fmt.Errorf("--jwt-secret-file: %w", err)
				}
				tokens = &trigger.HS256Tokens{Secret: []byte(strings.TrimSpace(string(b))), Issuer: *issuer, Audience: *audience}
			} else {
				log.Warn("--jwt-secret-file (SLESS_JWT_SECRET_FILE) is not set: cron and queue triggers get no credential and stay not Ready")
			}
			topts := trigger.Options{
				Config:                  triggerresources.Config{Image: *image, InvokeURL: *invokeURL, ImagePullPolicy: corev1.PullIfNotPresent},
				PublicURL:               publicBaseURL(fs),
				MaxConcurrentReconciles: *workers,
			}
			if tokens != nil {
				topts.Tokens = tokens
			}
			if err := trigger.SetupWithManager(mgr, topts); err != nil {
				return err
			}
			jopts := job.Options{Config: jobresources.Config{TTLSecondsAfterFinished: int32(*jobTTL)}, MaxConcurrentReconciles: *workers}
			if *databaseURL != "" {
				// Retention is sless api's: 0 here.
				pg, err := postgres.Start(ctx, *databaseURL, 0, log)
				if err != nil {
					return err
				}
				// The recorder's series join the controller's on its /metrics.
				rmetrics, err := invoke.NewRecorderMetrics(ctrlmetrics.Registry)
				if err != nil {
					return err
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
				jopts.Recorder = jobRecorder{rec}
			}
			return job.SetupWithManager(mgr, jopts)
		},
	}
}

// publicBaseURL is the controller's --public-base-url (registered by
// controller.go on the same flag set), read after parsing.
func publicBaseURL(fs *flag.FlagSet) string {
	if f := fs.Lookup("public-base-url"); f != nil {
		return f.Value.String()
	}
	return envOr("SLESS_PUBLIC_BASE_URL", "http://localhost:8080")
}

// jobRecorder records FunctionJob runs in the invocation history.
type jobRecorder struct{ r *invoke.Recorder }

func (j jobRecorder) RecordRun(run job.Run) {
	j.r.Record(invoke.Record{
		Namespace: run.Namespace, Function: run.Function, Revision: run.Revision, Trigger: invoke.TriggerJob,
		RequestID: run.RequestID, StartedAt: run.Started, Duration: run.Duration, Status: run.Status, Error: run.Error,
	})
}
