package stats

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/problems"
)

// Bounds of a query.
const (
	MinStep   = time.Second
	MaxWindow = 31 * 24 * time.Hour
	MaxSteps  = 1440
	// DefaultWindow is the window of a query that names none.
	DefaultWindow = time.Hour
)

// defaultSteps are tried in order for a query that names no step: the
// first that divides the window into at most defaultMaxSteps steps.
var defaultSteps = []time.Duration{time.Second, 10 * time.Second, time.Minute, 5 * time.Minute, 15 * time.Minute,
	time.Hour, 2 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour}

const defaultMaxSteps = 100

// params are the query parameters the stats route takes.
var params = []string{"window", "step", "until"}

// Parse reads the stats route's raw query string: window (default 1h),
// step (default: the first of 1s, 10s, 1m, 5m, 15m, 1h, 2h, 6h, 12h, 1d
// that cuts the window into at most 100 steps) and until (RFC 3339, default
// now). Durations are a whole number and a unit, s, m, h or d (7d), or Go's
// form (1h30m). The window ends at until rounded up to a whole step since
// the Unix epoch, so that steps stay put between two calls. Every bad value
// is reported with its parameter's name; the error is a query string that
// does not parse.
func Parse(namespace, function, raw string, now time.Time) (Query, []invoke.FieldError, error) {
	q := Query{Namespace: namespace, Function: function}
	v, errs, err := problems.Query(raw, "the invocation stats", params)
	if err != nil {
		return q, nil, err
	}
	invalid := func(name, detail string) {
		errs = append(errs, invoke.FieldError{Field: name, Detail: detail, Type: string(field.ErrorTypeInvalid)})
	}
	get := func(name string) (string, bool) {
		if vals := v[name]; len(vals) == 1 {
			return vals[0], true
		}
		return "", false
	}
	window, step := DefaultWindow, time.Duration(0)
	if s, ok := get("window"); ok {
		d, err := ParseDuration(s)
		switch {
		case err != nil:
			invalid("window", "must be a duration such as 15m, 1h, 24h or 7d")
		case d < time.Minute || d > MaxWindow:
			invalid("window", "must be from 1m to "+FormatDuration(MaxWindow))
		case d%time.Second != 0:
			invalid("window", "must be a whole number of seconds")
		default:
			window = d
		}
	}
	if s, ok := get("step"); ok {
		d, err := ParseDuration(s)
		switch {
		case err != nil:
			invalid("step", "must be a duration such as 1m, 15m or 1h")
		case d < MinStep:
			invalid("step", "must be 1s or more")
		case d%time.Second != 0:
			invalid("step", "must be a whole number of seconds")
		default:
			step = d
		}
	}
	until := now
	if s, ok := get("until"); ok {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			invalid("until", "must be an RFC 3339 time such as 2026-01-02T15:04:05Z")
		}
		until = t
	}
	if len(errs) > 0 {
		return q, errs, nil
	}
	if step == 0 {
		for _, d := range defaultSteps {
			if window%d == 0 && window/d <= defaultMaxSteps {
				step = d
				break
			}
		}
		if step == 0 {
			invalid("step", "give a step: no usual step cuts window "+FormatDuration(window)+" into at most 100 steps")
			return q, errs, nil
		}
	}
	switch {
	case step > window:
		invalid("step", "must not be longer than the window ("+FormatDuration(window)+")")
	case window%step != 0:
		invalid("step", "must divide the window ("+FormatDuration(window)+") into whole steps")
	case window/step > MaxSteps:
		invalid("step", fmt.Sprintf("cuts the window into %d steps, at most %d: use a step of %s or more",
			window/step, MaxSteps, FormatDuration((window+MaxSteps-1)/MaxSteps)))
	}
	if len(errs) > 0 {
		return q, errs, nil
	}
	end := until.UnixMicro()
	stepUS := step.Microseconds()
	if r := end % stepUS; r != 0 {
		end += stepUS - r
	}
	q.Until = time.UnixMicro(end).UTC()
	q.From = q.Until.Add(-window)
	q.Step = step
	return q, nil, nil
}

// ParseDuration reads a whole number and a unit, s, m, h or d, or a Go
// duration (1h30m).
func ParseDuration(s string) (time.Duration, error) {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil || days < 0 || days > 10000 {
			return 0, fmt.Errorf("not a number of days: %q", s)
		}
		return time.Duration(days) * 24 * time.Hour, nil
	}
	return time.ParseDuration(s)
}

// FormatDuration is d in the largest unit that holds it whole: 7d, 24h
// as 1d, 90m as 90m, 45s.
func FormatDuration(d time.Duration) string {
	for _, u := range []struct {
		d    time.Duration
		name string
	}{{24 * time.Hour, "d"}, {time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}} {
		if d >= u.d && d%u.d == 0 {
			return strconv.FormatInt(int64(d/u.d), 10) + u.name
		}
	}
	return d.String()
}
