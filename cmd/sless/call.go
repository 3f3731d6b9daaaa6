package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/sless-dev/sless/pkg/client"
	"github.com/sless-dev/sless/pkg/printers"
)

func init() {
	register("invoke", "call a function and print its answer", func(ctx context.Context, args []string) error {
		if cronCallArgs(args) {
			return runCronCall(ctx, args)
		}
		return runInvoke(ctx, os.Stdout, os.Stderr, os.Stdin, os.Getenv, args)
	})
}

// cronCallArgs tells the command line of a cron runner, which sless
// controllers before cron-call existed wrote into CronJobs as `sless invoke
// --url=…`: those keep running until the controller rewrites them. The
// user's invoke has no --url.
func cronCallArgs(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if f := strings.TrimLeft(a, "-"); a != f && (f == "url" || strings.HasPrefix(f, "url=")) {
			return true
		}
	}
	return false
}

const invokeSynopsis = `sless invoke NAME [-n NAMESPACE] [-d JSON | -d @FILE | -d @-] [-X METHOD] [-H 'Key: value']... [--path /sub?q=1] [-i] [--async [--wait] [--idempotency-key KEY]]

Call the function through the invoke path and print its answer's body.
-i prints the status line and headers first. The exit status is 1 when sless
itself answered with an error (X-Sless-Error: no capacity, a timeout, a
failed build), with its problem on stderr; a function's own error answers
print and exit 0 unless --fail is given.

--async asks for an asynchronous call (Prefer: respond-async): sless keeps
it, answers 202 at once and runs it later, retrying failures. The request id
is printed; --wait then follows the call's record until it ends and prints
the function's answer, exiting 1 when the call failed or was dead-lettered.`

type invokeCallOptions struct {
	name, ns string
	call     client.Call
	include  bool
	fail     bool
	async    bool
	wait     bool
}

func parseInvokeCall(args []string, stdin io.Reader) (invokeCallOptions, error) {
	fs := newFlags("invoke", invokeSynopsis)
	var o invokeCallOptions
	var c common
	c.register(fs, false)
	data := fs.String("d", "", "request body: JSON, @FILE or @- for stdin (sent as application/json unless -H sets Content-Type)")
	method := fs.String("X", "", "HTTP method (default: POST with -d, GET without)")
	var headers stringList
	fs.Var(&headers, "H", "request header 'Key: value' (repeatable)")
	fs.StringVar(&o.call.Path, "path", "", "path and query after the function's URL, e.g. /items?limit=2")
	fs.BoolVar(&o.include, "i", false, "print the status line and headers before the body")
	fs.BoolVar(&o.fail, "fail", false, "exit 1 on any status of 400 or more, the function's own too")
	fs.BoolVar(&o.async, "async", false, "call asynchronously: print the request id of the kept call (Prefer: respond-async)")
	fs.BoolVar(&o.wait, "wait", false, "with --async, follow the call until it ends and print its answer")
	idem := fs.String("idempotency-key", "", "with --async, a key that makes a repeated submit return the first call (24 h, per function)")
	name, err := onePositional(fs, args)
	if err != nil {
		return o, err
	}
	o.name, o.ns = name, c.ns
	var errs []error
	o.call.Header = http.Header{}
	for _, h := range headers {
		k, v, ok := strings.Cut(h, ":")
		k = strings.TrimSpace(k)
		if !ok || k == "" || strings.ContainsAny(k, " \t") {
			errs = append(errs, fmt.Errorf("-H %q: want 'Key: value'", h))
			continue
		}
		o.call.Header.Add(k, strings.TrimSpace(v))
	}
	if *method != "" {
		m := strings.ToUpper(*method)
		if strings.ContainsFunc(m, func(r rune) bool { return r < 'A' || r > 'Z' }) {
			errs = append(errs, fmt.Errorf("-X %q is not an HTTP method", *method))
		}
		o.call.Method = m
	}
	if isSet(fs, "d") {
		body, err := readData(*data, stdin)
		if err != nil {
			errs = append(errs, err)
		} else {
			if o.call.Header.Get("Content-Type") == "" && !json.Valid(body) {
				errs = append(errs, errors.New("-d is not valid JSON; set -H 'Content-Type: …' to send other data"))
			}
			o.call.Body = body
		}
	}
	if o.call.Path != "" && !strings.HasPrefix(o.call.Path, "/") {
		errs = append(errs, fmt.Errorf("--path %q must start with /", o.call.Path))
	}
	switch {
	case o.wait && !o.async:
		errs = append(errs, errors.New("--wait follows an asynchronous call: give --async too"))
	case *idem != "" && !o.async:
		errs = append(errs, errors.New("--idempotency-key is for asynchronous calls: give --async too"))
	case *idem != "" && (len(*idem) > 255 || strings.ContainsAny(*idem, " \t\"\\,;")):
		errs = append(errs, fmt.Errorf("--idempotency-key %q: at most 255 characters, without spaces, quotes, commas or semicolons", *idem))
	}
	if o.async {
		o.call.Header.Set("Prefer", "respond-async")
		if *idem != "" {
			o.call.Header.Set("Idempotency-Key", *idem)
		}
	}
	return o, errors.Join(errs...)
}

// readData is -d's body: the text itself, @FILE's content or @- stdin.
func readData(d string, stdin io.Reader) ([]byte, error) {
	switch {
	case d == "@-":
		b, err := io.ReadAll(stdin)
		if err != nil {
			return nil, fmt.Errorf("-d @-: reading stdin: %w", err)
		}
		return b, nil
	case strings.HasPrefix(d, "@"):
		b, err := os.ReadFile(d[1:])
		if err != nil {
			return nil, fmt.Errorf("-d: %w", err)
		}
		return b, nil
	}
	return []byte(d), nil
}

func runInvoke(ctx context.Context, stdout, stderr io.Writer, stdin io.Reader, getenv func(string) string, args []string) error {
	o, err := parseInvokeCall(args, stdin)
	if err != nil {
		return err
	}
	s, err := connect(ctx, getenv, o.ns)
	if err != nil {
		return err
	}
	ans, err := s.api.Invoke(ctx, s.ns, o.name, o.call)
	if err != nil {
		return err
	}
	if o.async && ans.Status == http.StatusAccepted && ans.Header.Get("Preference-Applied") == "respond-async" {
		return followAsync(ctx, stdout, stderr, s.api, s.ns, o, ans)
	}
	if o.async && !ans.SlessError() {
		fmt.Fprintln(stderr, "sless invoke: the server ran the call at once (it keeps no asynchronous calls)")
	}
	if o.include {
		printers.Head(stdout, ans.Status, ans.Header)
	}
	if ans.SlessError() {
		if o.include {
			printers.Body(stdout, ans.Body)
		}
		fmt.Fprintf(stderr, "sless invoke: %s\n", printers.Problem(ans))
		return errSilent
	}
	printers.Body(stdout, ans.Body)
	if o.fail && ans.Status >= 400 {
		fmt.Fprintf(stderr, "sless invoke: the function answered %d %s\n", ans.Status, http.StatusText(ans.Status))
		return errSilent
	}
	return nil
}

// followAsync prints an accepted asynchronous call's id and, with --wait,
// follows its record until it ends.
func followAsync(ctx context.Context, stdout, stderr io.Writer, api *client.Client, ns string, o invokeCallOptions, ans *client.Answer) error {
	id := ans.Header.Get("X-Request-Id")
	if !o.wait {
		fmt.Fprintln(stdout, id)
		return nil
	}
	fmt.Fprintf(stderr, "sless invoke: accepted as %s\n", id)
	rec, err := api.AwaitAsyncInvocation(ctx, ns, o.name, id)
	if err != nil {
		return err
	}
	printers.AsyncAnswer(stdout, rec, o.include)
	// A dead-lettered call is sless giving up; a failed one is the
	// function's own 4xx, an error only with --fail, as for sync calls.
	if rec.State == "dead-lettered" || o.fail && rec.State != "succeeded" {
		fmt.Fprintf(stderr, "sless invoke: the call %s after %d attempts: %s\n", rec.State, rec.Attempts, rec.LastError)
		return errSilent
	}
	return nil
}
