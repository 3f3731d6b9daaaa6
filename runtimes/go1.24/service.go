package sless

import (
	"context"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// Serve runs a SlessService's web app: every request but GET on
// HealthPath reaches h as it came, whole path included, with the
// net/http ResponseWriter itself, so h flushes streams and hijacks
// upgrades (WebSockets) as it would on its own server. It does not return.
// The main package sless generates for a service calls it.
func Serve(h http.Handler) {
	cfg := configFromEnv(os.Getenv)
	flush := captureOutput()
	if cfg.functionDir != "" {
		_ = os.Chdir(cfg.functionDir)
	}
	code := 0
	if err := serveApp(cfg, h, nil); err != nil {
		baseLogger.Error("server failed", "error", err.Error())
		code = 1
	}
	flush()
	os.Exit(code)
}

func serveApp(cfg config, h http.Handler, ready chan<- string) error {
	ln, err := net.Listen("tcp", net.JoinHostPort(cfg.host, cfg.port))
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet && r.URL.Path == HealthPath {
				w.Header().Set("Content-Type", "application/json")
				w.Write([]byte(`{"status":"ok"}`))
				return
			}
			h.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       65 * time.Second,
		MaxHeaderBytes:    1 << 20,
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	baseLogger.Info("listening", "port", ln.Addr().(*net.TCPAddr).Port, "mode", "service")
	if ready != nil {
		ready <- ln.Addr().String()
	}
	select {
	case err := <-errc:
		return err
	case sig := <-sigs:
		baseLogger.Info("draining", "signal", sig.String())
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.timeout+time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		baseLogger.Error("in-flight requests did not finish before the drain deadline", "error", err.Error())
	}
	baseLogger.Info("stopped")
	return nil
}
