package sless

import "net/http"

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
		h.ServeHTTP(w, r)
	}), ready, "mode", "service")
}
