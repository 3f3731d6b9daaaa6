package sless

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"
)

// config is the wrapper's environment contract (docs/runtimes.md).
type config struct {
	port            string
	host            string
	functionDir     string
	functionName    string
	namespace       string
	revision        string
	timeout         time.Duration
	mode            string
	payload         string
	terminationPath string
}

func configFromEnv(getenv func(string) string) config {
	c := config{
		port:            getenv("PORT"),
		host:            getenv("SLESS_LISTEN_HOST"),
		functionDir:     getenv("SLESS_FUNCTION_DIR"),
		functionName:    getenv("SLESS_FUNCTION_NAME"),
		namespace:       getenv("SLESS_NAMESPACE"),
		revision:        getenv("SLESS_REVISION"),
		mode:            getenv("SLESS_MODE"),
		payload:         getenv("SLESS_PAYLOAD"),
		terminationPath: getenv("SLESS_TERMINATION_MESSAGE_PATH"),
		timeout:         30 * time.Second,
	}
	if c.port == "" {
		c.port = "8080"
	}
	if c.functionDir == "" {
		c.functionDir = "/sless/function"
	}
	if c.revision == "" {
		c.revision = getenv("K_REVISION")
	}
	if c.terminationPath == "" {
		c.terminationPath = "/dev/termination-log"
	}
	if s, err := strconv.ParseFloat(getenv("SLESS_TIMEOUT_SECONDS"), 64); err == nil && s > 0 {
		c.timeout = time.Duration(s * float64(time.Second))
	}
	return c
}

// lineWriter writes whole lines to the process's real stdout, one at a time.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

var (
	logOut     = &lineWriter{w: os.Stdout}
	baseLogger = newLogger(logOut)
)

// newLogger logs JSON lines with the contract's keys: time, level, msg.
func newLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{
		Level: slog.LevelDebug,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 {
				switch a.Key {
				case slog.TimeKey:
					return slog.String("time", a.Value.Time().UTC().Format("2006-01-02T15:04:05.000Z"))
				case slog.LevelKey:
					return slog.String("level", strings.ToLower(a.Value.String()))
				}
			}
			return a
		},
	}))
}

// captureOutput points os.Stdout and os.Stderr at pipes whose lines become
// JSON log lines, so that what a handler prints stays structured. Go has no
// goroutine-local state, so these lines carry no request id; Logger(ctx) does.
// The returned function flushes what is buffered.
func captureOutput() (flush func()) {
	var wg sync.WaitGroup
	var writers []*os.File
	pump := func(target **os.File, level slog.Level) {
		r, w, err := os.Pipe()
		if err != nil {
			return
		}
		*target = w
		writers = append(writers, w)
		wg.Add(1)
		go func() {
			defer wg.Done()
			pumpLines(r, func(line string) {
				baseLogger.Log(context.Background(), level, line, "source", "function")
			})
		}()
	}
	pump(&os.Stdout, slog.LevelInfo)
	pump(&os.Stderr, slog.LevelError)
	return func() {
		for _, w := range writers {
			w.Close()
		}
		wg.Wait()
	}
}

// Start runs h under the sless contract: it serves HTTP until SIGTERM, or with
// SLESS_MODE=job calls h once on SLESS_PAYLOAD. It does not return.
func Start[E, T any](h func(context.Context, E) (T, error)) {
	run(func(cfg config) int {
		if cfg.mode == "job" {
			return runJob(cfg, adapt(h))
		}
		return exitCode(serve(cfg, adapt(h), nil))
	})
}

// run is a process under the sless contract, a function's or a service's:
// it reads the contract's environment, turns printed output into log
// lines, enters the function's folder, runs main, and exits with main's
// status once the output is flushed.
func run(main func(cfg config) int) {
	cfg := configFromEnv(os.Getenv)
	flush := captureOutput()
	if cfg.mode != "job" {
		activeTracer = tracerFromEnv(os.Getenv, cfg)
	}
	if cfg.functionDir != "" {
		_ = os.Chdir(cfg.functionDir)
	}
	code := main(cfg)
	activeTracer.shutdown(5 * time.Second)
	flush()
	os.Exit(code)
}

// activeTracer exports the calls' spans; nil when tracing is off.
var activeTracer *tracer

// exitCode logs a server's failure and is the process's exit status.
func exitCode(err error) int {
	if err != nil {
		baseLogger.Error("server failed", "error", err.Error())
		return 1
	}
	return 0
}

// maxOutputLine is the longest log line a printed line becomes; a longer
// one is logged in pieces of this size.
const maxOutputLine = 1 << 20

// pumpLines calls emit with each line read from r until r ends, a line
// longer than maxOutputLine in pieces. It must never stop reading before
// r ends: a pipe nobody reads fills up, and then every fmt.Print of the
// handler blocks for good (a bufio.Scanner gives up at its first too-long
// line, which wedged the function until its process was restarted).
func pumpLines(r io.Reader, emit func(string)) {
	br := bufio.NewReaderSize(r, 64<<10)
	var line []byte
	split := false // part of the current line went out already
	for {
		chunk, more, err := br.ReadLine()
		if err != nil {
			return // the writers closed; ReadLine returned any unterminated last line before
		}
		line = append(line, chunk...)
		for len(line) >= maxOutputLine {
			emit(string(line[:maxOutputLine]))
			line, split = line[maxOutputLine:], true
		}
		if !more {
			if len(line) > 0 || !split {
				emit(string(line))
			}
			line, split = line[:0], false
		}
	}
}

func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// outcome is what one handler call produced.
type outcome struct {
	value    any
	err      error
	panicked bool
	stack    string
}

// call runs the handler on its own goroutine and waits for it until ctx's
// deadline. A handler that ignores ctx keeps running; its result is dropped.
func call(ctx context.Context, h handler, ev *Event) (outcome, bool) {
	done := make(chan outcome, 1)
	go func() {
		var out outcome
		defer func() {
			if p := recover(); p != nil {
				out = outcome{err: fmt.Errorf("panic: %v", p), panicked: true, stack: string(debug.Stack())}
			}
			done <- out
		}()
		out.value, out.err = h(ctx, ev)
	}()
	select {
	case out := <-done:
		return out, true
	case <-ctx.Done():
		return outcome{}, false
	}
}

func (c config) invocation(parent context.Context, requestID string, sp *span) (context.Context, context.CancelFunc) {
	deadline := time.Now().Add(c.timeout)
	ctx, cancel := context.WithDeadline(parent, deadline)
	return context.WithValue(ctx, contextKey{}, c.context(requestID, deadline, sp)), cancel
}

func (c config) context(requestID string, deadline time.Time, sp *span) *Context {
	ictx := &Context{
		FunctionName: c.functionName,
		Namespace:    c.namespace,
		Revision:     c.revision,
		RequestID:    requestID,
		Deadline:     deadline,
		logger:       baseLogger.With(append([]any{"requestId", requestID}, sp.logAttrs()...)...),
	}
	if sp != nil {
		ictx.TraceID, ictx.SpanID, ictx.TraceParent = sp.traceID, sp.spanID, sp.traceparent()
	}
	return ictx
}

// server is the HTTP side of the wrapper.
type server struct {
	cfg config
	h   handler
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	requestID := r.Header.Get("X-Request-Id")
	if requestID == "" {
		requestID = newRequestID()
	}
	w.Header().Set("X-Request-Id", requestID)
	if r.Method == http.MethodGet && r.URL.Path == HealthPath {
		writeJSON(w, 200, map[string]string{"status": "ok"})
		return
	}
	start := time.Now()
	sp := s.startSpan(r, requestID)
	status := s.handle(w, r, requestID, sp)
	baseLogger.Info("request", append([]any{"requestId", requestID, "method", r.Method, "path", requestPath(r),
		"status", status, "durationMs", float64(time.Since(start).Microseconds()) / 1000}, sp.logAttrs()...)...)
	endSpan(sp, status)
}

// startSpan opens the span of one call (nil when tracing is off), named for
// the function as OpenTelemetry's FaaS conventions have it.
func (s *server) startSpan(r *http.Request, requestID string) *span {
	if activeTracer == nil {
		return nil
	}
	name := s.cfg.functionName
	if name == "" {
		name = "handler"
	}
	sp, cold := activeTracer.start(name, r.Header.Get("Traceparent"), r.Header.Get("Tracestate"))
	sp.set("faas.trigger", "http")
	sp.set("faas.invocation_id", requestID)
	sp.set("faas.coldstart", cold)
	sp.set("http.request.method", r.Method)
	sp.set("url.path", requestPath(r))
	return sp
}

// endSpan records the answer's status and ends the span; a 5xx without a
// failure of its own is an error of that status.
func endSpan(sp *span, status int) {
	if sp == nil {
		return
	}
	sp.set("http.response.status_code", status)
	if status >= 500 && sp.status.Code == 0 {
		sp.fail("Error", "HTTP "+strconv.Itoa(status))
	}
	sp.end()
}

func (s *server) handle(w http.ResponseWriter, r *http.Request, requestID string, sp *span) int {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeJSON(w, 400, newErrorBody("BadRequest", "cannot read the request body: "+err.Error(), requestID))
		return 400
	}
	ev := &Event{
		Method:   r.Method,
		Path:     requestPath(r),
		Query:    parseQuery(r.URL.RawQuery),
		RawQuery: r.URL.RawQuery,
		Headers:  make(map[string]string, len(r.Header)+1),
		Body:     body,
	}
	for k, vs := range r.Header {
		ev.Headers[strings.ToLower(k)] = strings.Join(vs, ", ")
	}
	// net/http moves these two out of r.Header; the other wrappers show them
	// as the client sent them.
	if r.Host != "" {
		ev.Headers["host"] = r.Host
	}
	if len(r.TransferEncoding) > 0 {
		ev.Headers["transfer-encoding"] = strings.Join(r.TransferEncoding, ", ")
	}
	if len(body) > 0 && ev.IsJSON() {
		// json.Valid passes bytes that are not UTF-8 inside strings, which
		// Unmarshal then turns into U+FFFD; RFC 8259 JSON is UTF-8, and the
		// Python and Node.js wrappers refuse such a body too.
		if msg := jsonProblem(body); msg != "" {
			writeJSON(w, 400, newErrorBody("BadRequest", "request body is not valid JSON: "+msg, requestID))
			return 400
		}
	}
	ctx, cancel := s.cfg.invocation(r.Context(), requestID, sp)
	defer cancel()
	out, ok := call(ctx, s.h, ev)
	if !ok {
		if r.Context().Err() != nil {
			return 499 // the client went away; nobody to answer
		}
		msg := fmt.Sprintf("function exceeded its timeout of %gs", s.cfg.timeout.Seconds())
		sp.fail("Timeout", msg)
		baseLogger.Error("function timed out", append([]any{"requestId", requestID, "timeoutSeconds", s.cfg.timeout.Seconds()}, sp.logAttrs()...)...)
		writeJSON(w, 504, newErrorBody("Timeout", msg, requestID))
		return 504
	}
	if out.err != nil {
		typ := errorType(out.err)
		if out.panicked {
			typ = "Panic"
		}
		status := errorStatus(out.err)
		if status >= 500 {
			sp.fail(typ, out.err.Error())
		}
		logFunctionError(requestID, typ, out, sp.logAttrs()...)
		writeJSON(w, status, newErrorBody(typ, out.err.Error(), requestID))
		return status
	}
	enc, err := recoverTo(func() (encoded, error) { return encodeResult(out.value) })
	if err != nil {
		sp.fail("BadResult", "cannot encode the function's result: "+err.Error())
		logBadResult(requestID, err, sp.logAttrs()...)
		writeJSON(w, 500, newErrorBody("BadResult", "cannot encode the function's result: "+err.Error(), requestID))
		return 500
	}
	for k, vs := range enc.headers {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	noBody := enc.status == http.StatusNoContent || enc.status == http.StatusNotModified
	if !noBody {
		w.Header().Set("Content-Length", strconv.Itoa(len(enc.body)))
	}
	w.WriteHeader(enc.status)
	if r.Method != http.MethodHead && !noBody {
		_, _ = w.Write(enc.body)
	}
	return enc.status
}

func logFunctionError(requestID, typ string, out outcome, extra ...any) {
	stack := out.stack
	if stack == "" {
		stack = fmt.Sprintf("%+v", out.err)
	}
	baseLogger.Error(fmt.Sprintf("function returned %s: %v", typ, out.err),
		append([]any{"requestId", requestID, "errorType", typ, "stack", stack}, extra...)...)
}

// requestPath is the path as the client sent it, escapes and all, as the
// Python and Node.js wrappers see it: r.URL.Path is decoded (a%2Fb reads as
// a/b), and EscapedPath re-escapes it when the original is not its canonical
// form.
func requestPath(r *http.Request) string {
	if strings.HasPrefix(r.RequestURI, "/") {
		p, _, _ := strings.Cut(r.RequestURI, "?")
		return p
	}
	if p := r.URL.EscapedPath(); p != "" {
		return p // absolute-form target (through a proxy) or "*"
	}
	return "/"
}

// parseQuery gives the first value of each query parameter as Python's
// parse_qsl and the WHATWG URLSearchParams do: split on "&" only, "+" is a
// space, malformed escapes stay as written, and bytes that are not UTF-8
// become U+FFFD. url.ParseQuery instead drops a pair with ";" or a bad escape.
func parseQuery(raw string) map[string]string {
	q := map[string]string{}
	for _, part := range strings.Split(raw, "&") {
		if part == "" {
			continue
		}
		k, v, _ := strings.Cut(part, "=")
		k = unescapeLenient(k)
		if _, seen := q[k]; !seen {
			q[k] = unescapeLenient(v)
		}
	}
	return q
}

func unescapeLenient(s string) string {
	if !strings.ContainsAny(s, "%+") {
		return s
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '+':
			b = append(b, ' ')
		case c == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]):
			b = append(b, unhex(s[i+1])<<4|unhex(s[i+2]))
			i += 2
		default:
			b = append(b, c)
		}
	}
	return toValidUTF8(b)
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}

// toValidUTF8 replaces each maximal invalid subpart with U+FFFD, the Unicode
// practice Python's "replace" and the WHATWG decoder follow;
// strings.ToValidUTF8 would merge a run of them into one.
func toValidUTF8(b []byte) string {
	var sb strings.Builder
	sb.Grow(len(b))
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			sb.WriteRune(utf8.RuneError)
			i += invalidRun(b[i:])
			continue
		}
		sb.Write(b[i : i+size])
		i += size
	}
	return sb.String()
}

// invalidRun is the length of the maximal subpart at the start of b: a lead
// byte with the continuation bytes that could still have completed it.
func invalidRun(b []byte) int {
	lo, hi := byte(0x80), byte(0xBF)
	var n int
	switch c := b[0]; {
	case 0xC2 <= c && c <= 0xDF:
		n = 1
	case c == 0xE0:
		n, lo = 2, 0xA0
	case 0xE1 <= c && c <= 0xEC, c == 0xEE, c == 0xEF:
		n = 2
	case c == 0xED:
		n, hi = 2, 0x9F
	case c == 0xF0:
		n, lo = 3, 0x90
	case 0xF1 <= c && c <= 0xF3:
		n = 3
	case c == 0xF4:
		n, hi = 3, 0x8F
	default:
		return 1
	}
	i := 1
	for ; i <= n && i < len(b); i++ {
		if b[i] < lo || b[i] > hi {
			break
		}
		lo, hi = 0x80, 0xBF
	}
	return i
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// serve serves the function's handler (see serveHTTP).
func serve(cfg config, h handler, ready chan<- string) error {
	return serveHTTP(cfg, &server{cfg: cfg, h: h}, ready)
}

// serveHTTP listens on the configured port and serves h until SIGTERM or
// SIGINT, then stops accepting and lets in-flight requests finish (bounded
// by the timeout). ready, when not nil, receives the listening address;
// logAttrs go on the "listening" line.
func serveHTTP(cfg config, h http.Handler, ready chan<- string, logAttrs ...any) error {
	ln, err := net.Listen("tcp", net.JoinHostPort(cfg.host, cfg.port))
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       65 * time.Second,
		// The Python and Node.js wrappers take the same: 1 MiB of request
		// line and headers, any number of them.
		MaxHeaderBytes: 1 << 20,
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	baseLogger.Info("listening", append([]any{"port", ln.Addr().(*net.TCPAddr).Port}, logAttrs...)...)
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

// recoverTo runs an encoding of the handler's result, a panic in the
// result's own code (a MarshalJSON method) being its error: encoding/json
// passes such a panic on, which took the connection down (a 502 from the
// proxy) or, in job mode, the process, where Python and Node.js answer a
// BadResult.
func recoverTo[T any](encode func() (T, error)) (v T, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic while encoding it: %v", r)
		}
	}()
	return encode()
}

// logBadResult logs a result the wrapper cannot send as the other wrappers
// do: one error line whose errorType is the answer's type.
func logBadResult(requestID string, err error, extra ...any) {
	baseLogger.Error("cannot encode the function's result: "+err.Error(), append([]any{"requestId", requestID,
		"errorType", "BadResult", "stack", err.Error()}, extra...)...)
}

// jsonProblem says why b is not a JSON text, or "" when it is one.
func jsonProblem(b []byte) string {
	if json.Valid(b) {
		if utf8.Valid(b) {
			return ""
		}
		return "it is not UTF-8"
	}
	// Only a refused body pays for decoding, which names the fault.
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err.Error()
	}
	return "it does not parse"
}

// runJob calls the handler once with SLESS_PAYLOAD as the body and writes the
// result (exit 0) or the error (exit 1) to the termination-message path.
func runJob(cfg config, h handler) int {
	requestID := os.Getenv("SLESS_REQUEST_ID")
	if requestID == "" {
		requestID = newRequestID()
	}
	payload := strings.TrimSpace(cfg.payload)
	if payload != "" && !json.Valid([]byte(payload)) {
		return finishJob(cfg, newErrorBody("BadPayload", "SLESS_PAYLOAD is not valid JSON", requestID), 1)
	}
	ev := &Event{
		Method:  http.MethodPost,
		Path:    "/",
		Query:   map[string]string{},
		Headers: map[string]string{"content-type": "application/json"},
		Body:    []byte(payload),
	}
	ctx, cancel := cfg.invocation(context.Background(), requestID, nil)
	defer cancel()
	out, ok := call(ctx, h, ev)
	if !ok {
		baseLogger.Error("function timed out", "requestId", requestID, "timeoutSeconds", cfg.timeout.Seconds())
		return finishJob(cfg, newErrorBody("Timeout", fmt.Sprintf("function exceeded its timeout of %gs", cfg.timeout.Seconds()), requestID), 1)
	}
	if out.err != nil {
		typ := errorType(out.err)
		if out.panicked {
			typ = "Panic"
		}
		logFunctionError(requestID, typ, out)
		return finishJob(cfg, newErrorBody(typ, out.err.Error(), requestID), 1)
	}
	b, err := recoverTo(func() ([]byte, error) { return json.Marshal(out.value) })
	if err != nil {
		logBadResult(requestID, err)
		return finishJob(cfg, newErrorBody("BadResult", "cannot encode the function's result: "+err.Error(), requestID), 1)
	}
	baseLogger.Info("job finished", "requestId", requestID)
	return finishJob(cfg, json.RawMessage(b), 0)
}

func finishJob(cfg config, v any, code int) int {
	b, err := json.Marshal(v)
	if err == nil {
		err = os.WriteFile(cfg.terminationPath, b, 0o644)
	}
	if err != nil {
		baseLogger.Error("cannot write the termination message", "error", err.Error())
		return 2
	}
	return code
}
