package sless

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"time"
)

// Serve runs a SlessService's web app: every request but GET on
// HealthPath reaches h as it came, whole path included, with the
// net/http ResponseWriter itself, so h flushes streams and hijacks
// upgrades (WebSockets) as it would on its own server. It does not return.
// The main package sless generates for a service calls it.
func Serve(h http.Handler) {
	run(func(cfg config) int { return exitCode(serveApp(cfg, h, nil)) })
}

func serveApp(cfg config, h http.Handler, ready chan<- string) error {
	return serveHTTP(cfg, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Path == HealthPath {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"status":"ok"}`))
			return
		}
		if activeTracer == nil {
			h.ServeHTTP(w, r)
			return
		}
		serveTraced(cfg, h, w, r)
	}), ready, "mode", "service")
}

// serveTraced serves one request of a service's app under a span named for
// its method (OpenTelemetry's HTTP conventions, the route being unknown);
// FromContext(r.Context()) and Logger(r.Context()) carry the span's ids.
func serveTraced(cfg config, h http.Handler, w http.ResponseWriter, r *http.Request) {
	sp, cold := activeTracer.start(r.Method, r.Header.Get("Traceparent"), r.Header.Get("Tracestate"))
	sp.set("faas.coldstart", cold)
	sp.set("http.request.method", r.Method)
	sp.set("url.path", r.URL.Path)
	rec := &statusWriter{ResponseWriter: w}
	status := 500
	defer func() {
		if rec.status != 0 {
			status = rec.status
		}
		if p := recover(); p != nil {
			sp.fail("Panic", "panic serving the request")
			endSpan(sp, 500)
			panic(p)
		}
		endSpan(sp, status)
	}()
	ctx := r.Context()
	ictx := cfg.context(r.Header.Get("X-Request-Id"), time.Time{}, sp)
	h.ServeHTTP(rec, r.WithContext(context.WithValue(ctx, contextKey{}, ictx)))
	if rec.status == 0 {
		rec.status = http.StatusOK // the app wrote nothing: net/http answers 200
	}
}

// statusWriter notes the status an app answers with, and passes flushes and
// hijacks through to the server's own ResponseWriter.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 || w.status < 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	hj, ok := w.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("the connection cannot be hijacked")
	}
	if w.status == 0 {
		w.status = http.StatusSwitchingProtocols
	}
	return hj.Hijack()
}

// Unwrap lets http.ResponseController reach the server's ResponseWriter.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
