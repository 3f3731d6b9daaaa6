package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/sless-dev/sless/pkg/tracing"
)

// startTracing sets tracing up from the OTEL_* variables
// (docs/observability.md) for the command named service, and says where
// spans go. Stop it on exit: it flushes the spans still batched.
func startTracing(ctx context.Context, service string, log *slog.Logger) (*tracing.Tracing, error) {
	t, err := tracing.Setup(ctx, tracing.Options{Service: service, Version: version})
	if err != nil {
		return nil, err
	}
	if t.Enabled() {
		log.Info("tracing: " + t.Describe())
	}
	return t, nil
}

// stopTracing flushes the spans; a collector that cannot be reached at
// exit is reported, not fatal.
func stopTracing(t *tracing.Tracing, log *slog.Logger) {
	if err := t.Shutdown(context.Background()); err != nil {
		if log == nil {
			fmt.Fprintln(os.Stderr, "sless:", err)
			return
		}
		log.Warn("tracing: spans lost at exit", "error", err)
	}
}

// consumerTracingEnv is the OTEL_* variables of environ (the controller's),
// for the queue consumers it runs: their spans go where the controller's
// go. The service name is left out: a consumer is sless-consume.
func consumerTracingEnv(environ []string) []corev1.EnvVar {
	var env []corev1.EnvVar
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "OTEL_") && k != "OTEL_SERVICE_NAME" {
			env = append(env, corev1.EnvVar{Name: k, Value: v})
		}
	}
	// Sorted, so the consumers' Deployments do not change with the order.
	slices.SortFunc(env, func(a, b corev1.EnvVar) int { return strings.Compare(a.Name, b.Name) })
	return env
}
