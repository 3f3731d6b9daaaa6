package api

import (
	"bufio"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/logs"
)

// LatestBuild in …/builds/{build}/logs names the build status.buildRef
// names: the current source's.
const LatestBuild = "latest"

// logParams are the query parameters of the logs routes.
var logParams = []string{"follow", "since", "tail", "invocation", "timestamps"}

// logQuery reads the logs routes' parameters; every bad one is a field
// error, all of them in one 400.
func logQuery(c *gin.Context, now time.Time) (logs.Query, bool, *Problem) {
	q := logs.Query{Tail: -1}
	var errs field.ErrorList
	boolean := func(name string) bool {
		v, ok := c.GetQuery(name)
		if !ok {
			return false
		}
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, field.Invalid(field.NewPath(name), v, "want true or false"))
		}
		return b
	}
	q.Follow = boolean("follow")
	stamps := boolean("timestamps")
	if v, ok := c.GetQuery("since"); ok {
		if d, err := time.ParseDuration(v); err == nil {
			if d <= 0 {
				errs = append(errs, field.Invalid(field.NewPath("since"), v, "a duration must be positive: 10m is the last ten minutes"))
			}
			q.Since = now.Add(-d)
		} else if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
			q.Since = t
		} else {
			errs = append(errs, field.Invalid(field.NewPath("since"), v, "want a duration (10m, 1h30m) or an RFC 3339 time (2026-12-05T14:00:00Z)"))
		}
	}
	if v, ok := c.GetQuery("tail"); ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			errs = append(errs, field.Invalid(field.NewPath("tail"), v, "want a whole number of lines, 0 or more"))
		}
		q.Tail = n
	}
	if v, ok := c.GetQuery("invocation"); ok {
		switch {
		case c.Param("build") != "":
			errs = append(errs, field.Forbidden(field.NewPath("invocation"), "a build's log has no invocations"))
		case v == "" || len(v) > invoke.MaxRequestIDLength:
			errs = append(errs, field.Invalid(field.NewPath("invocation"), v,
				fmt.Sprintf("want a request id (X-Request-Id, requestId of an invocation) of 1 to %d characters", invoke.MaxRequestIDLength)))
		}
		q.Invocation = v
	}
	if len(errs) > 0 {
		return q, false, invalid("The query", errs)
	}
	return q, stamps, nil
}

// newWorkload makes the empty object of a logs route: a Function, or a
// SlessService under …/services/.
type newWorkload func() slessv1alpha1.Workload

func newFunction() slessv1alpha1.Workload { return &slessv1alpha1.Function{} }
func newService() slessv1alpha1.Workload  { return &slessv1alpha1.SlessService{} }

// instanceLogs serves GET …/functions/{name}/logs and …/services/{name}/logs.
func (s *Server) instanceLogs(kind newWorkload) gin.HandlerFunc {
	return func(c *gin.Context) {
		s.serveLogs(c, kind, func(fn slessv1alpha1.Workload, q logs.Query, emit logs.Emit) error {
			return s.opts.Logs.Function(c.Request.Context(), fn, q, emit)
		})
	}
}

// buildLogs serves GET …/functions/{name}/builds/{build}/logs and the
// services' route.
func (s *Server) buildLogs(kind newWorkload) gin.HandlerFunc {
	return func(c *gin.Context) {
		if b := c.Param("build"); b != LatestBuild {
			if msgs := validation.IsDNS1123Label(b); len(msgs) > 0 {
				writeProblem(c, badRequestField("build", b, msgs[0]+`; or "latest", the build of the current source`))
				return
			}
		}
		s.serveLogs(c, kind, func(fn slessv1alpha1.Workload, q logs.Query, emit logs.Emit) error {
			build := c.Param("build")
			if build == LatestBuild {
				if build = fn.WorkloadStatus().BuildRef; build == "" {
					return fmt.Errorf("%w: %s %q has no build yet", logs.ErrNotFound, fn.WorkloadKind(), fn.GetName())
				}
			}
			return s.opts.Logs.Build(c.Request.Context(), fn, build, q, emit)
		})
	}
}

// logsProblem answers a read that failed before its first line.
func (s *Server) logsProblem(c *gin.Context, fn slessv1alpha1.Workload, err error) {
	if errors.Is(err, logs.ErrNotFound) {
		writeProblem(c, notFound("%v", err))
		return
	}
	s.log.Error("read logs", "namespace", fn.GetNamespace(), "kind", fn.WorkloadKind(), "name", fn.GetName(), "error", err)
	writeProblem(c, unavailable(5, "the logs of %s %q cannot be read now: %v", fn.WorkloadKind(), fn.GetName(), err))
}

// serveLogs answers with the lines read as text/plain, one a line, each
// flushed when following so a client sees it at once. Until the first
// line an error is a problem; after it the answer just ends.
func (s *Server) serveLogs(c *gin.Context, kind newWorkload, read func(slessv1alpha1.Workload, logs.Query, logs.Emit) error) {
	if s.opts.Logs == nil {
		writeProblem(c, problem(http.StatusNotImplemented, "no-logs", "No logs", "this server reads no logs"))
		return
	}
	q, stamps, p := logQuery(c, time.Now())
	if p != nil {
		writeProblem(c, p)
		return
	}
	fn := kind()
	if err := s.objects.Get(c.Request.Context(), client.ObjectKey{Namespace: c.Param("ns"), Name: c.Param("name")}, fn); err != nil {
		writeProblem(c, storeProblem(err))
		return
	}
	if c.Request.Method == http.MethodHead {
		c.Header("Content-Type", "text/plain; charset=utf-8")
		c.Status(http.StatusOK)
		return
	}
	if q.Follow {
		// A missing build is a 404, not an empty stream: it is asked for
		// without following (no lines) before the answer begins.
		probe := q
		probe.Follow, probe.Tail = false, 0
		if err := read(fn, probe, func(logs.Line) error { return nil }); err != nil {
			s.logsProblem(c, fn, err)
			return
		}
	}
	started := false
	start := func() {
		started = true
		c.Header("Content-Type", "text/plain; charset=utf-8")
		c.Header("X-Content-Type-Options", "nosniff")
		c.Header("Cache-Control", "no-store")
		c.Status(http.StatusOK)
		c.Writer.WriteHeaderNow()
		if q.Follow {
			c.Writer.Flush() // the client knows the stream is open
		}
	}
	if q.Follow {
		start()
	}
	w := bufio.NewWriterSize(c.Writer, 32<<10)
	err := read(fn, q, func(l logs.Line) error {
		if !started {
			start()
		}
		if stamps {
			if l.Time.IsZero() {
				w.WriteString("-")
			} else {
				w.WriteString(l.Time.UTC().Format(time.RFC3339Nano))
			}
			w.WriteByte(' ')
		}
		w.WriteString(l.Text)
		if err := w.WriteByte('\n'); err != nil {
			return err
		}
		if q.Follow {
			if err := w.Flush(); err != nil {
				return err
			}
			c.Writer.Flush()
		}
		return nil
	})
	if err != nil && !started && c.Request.Context().Err() == nil {
		s.logsProblem(c, fn, err)
		return
	}
	if !started {
		start()
	}
	_ = w.Flush()
	if err != nil && c.Request.Context().Err() == nil {
		s.log.Warn("read logs", "namespace", fn.GetNamespace(), "kind", fn.WorkloadKind(), "name", fn.GetName(), "error", err)
	}
}
