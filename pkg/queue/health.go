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
func (c *Consumer) ReadyHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		s, _ := c.State()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if s.Ready() {
			fmt.Fprintf(w, "consuming queue %s\n", c.cfg.Queue)
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, s.Reason(c.cfg.Queue))
	})
}

// LiveHandler answers a liveness probe: 200 as long as the process serves
// it, also while the consumer reconnects to a broker that is away. A
// restart would not bring the broker back, and a pod restarted in a loop
// only backs off longer before it consumes again; a consumer that can no
// longer work ends `sless consume` by itself.
func (c *Consumer) LiveHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		fmt.Fprintln(w, "ok")
	})
}

// Reason says in words why a consumer of queue is not consuming, or that it is.
func (s State) Reason(queue string) string {
	switch {
	case s.Ready():
		return "consuming queue " + queue
	case s.Stopped && s.Err != nil:
		return "stopped: " + s.Err.Error()
	case s.Stopped:
		return "stopped"
	case s.Err != nil:
		return "not consuming queue " + queue + ", reconnecting: " + s.Err.Error()
	}
	return "connecting to the broker to consume queue " + queue
}

// RunWithHealth runs the consumer while ln serves its readiness at
// readyPath and its liveness at livePath, the paths its Deployment's
// probes ask. Probes are answered (not ready) until the calls in flight
// are done; then the server goes with the process.
func (c *Consumer) RunWithHealth(ctx context.Context, ln net.Listener, readyPath, livePath string) error {
	mux := http.NewServeMux()
	mux.Handle("GET "+readyPath, c.ReadyHandler())
	mux.Handle("GET "+livePath, c.LiveHandler())
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
