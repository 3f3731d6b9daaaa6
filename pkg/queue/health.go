package queue

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// ReadyHandler answers a readiness probe: 200 while the consumer is
// connected and consumes its queue, 503 otherwise, with the reason in the
// body (the last connection error, or that it is still connecting). A
// broker that is away makes the consumer not ready, so its Deployment and
// Trigger say so; it is not a reason to restart it (see LiveHandler).
func ReadyHandler(c Source) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		s, _ := c.State()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if !s.Ready() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		fmt.Fprintln(w, s.Reason(c.What()))
	})
}

// LiveHandler answers a liveness probe: 200 as long as the process serves
// it, also while the consumer reconnects to a broker that is away. A
// restart would not bring the broker back, and a pod restarted in a loop
// only backs off longer before it consumes again; a consumer that can no
// longer work ends `sless consume` by itself.
func LiveHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		fmt.Fprintln(w, "ok")
	})
}

// Reason says in words why a consumer of what (Source.What) is not
// consuming, or that it is.
func (s State) Reason(what string) string {
	switch {
	case s.Ready():
		return "consuming " + what
	case s.Stopped && s.Err != nil:
		return "stopped: " + s.Err.Error()
	case s.Stopped:
		return "stopped"
	case s.Err != nil:
		return "not consuming " + what + ", reconnecting: " + s.Err.Error()
	}
	return "connecting to the broker to consume " + what
}

// RunWithHealth runs the consumer c while ln serves its readiness at
// readyPath and its liveness at livePath, the paths its Deployment's
// probes ask. Probes are answered (not ready) until the calls in flight
// are done; then the server goes with the process.
func RunWithHealth(ctx context.Context, c Source, ln net.Listener, readyPath, livePath string) error {
	mux := http.NewServeMux()
	mux.Handle("GET "+readyPath, ReadyHandler(c))
	mux.Handle("GET "+livePath, LiveHandler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	runErr := c.Run(ctx)
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	if err := <-served; !errors.Is(err, http.ErrServerClosed) && runErr == nil {
		return fmt.Errorf("serve health on %s: %w", ln.Addr(), err)
	}
	return runErr
}
