package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/sless-dev/sless/pkg/client"
	"github.com/sless-dev/sless/pkg/printers"
)

func init() {
	registerOut("list", "list the functions of a namespace", runList)
	registerOut("describe", "show a function: spec, conditions, URL, last invocations", runDescribe)
	registerOut("history", "list a function's invocations, newest first", runHistory)
	registerOut("delete", "delete a function, or a service with --service", runDelete)
}

// common are the flags every resource command takes.
type common struct {
	ns, output string
}

func (c *common) register(fs *flag.FlagSet, outputs bool) {
	fs.StringVar(&c.ns, "n", "", "namespace (default: the login's)")
	fs.StringVar(&c.ns, "namespace", "", "namespace (default: the login's)")
	if outputs {
		fs.StringVar(&c.output, "o", "", "output format: json or yaml (default: a table)")
		fs.StringVar(&c.output, "output", "", "output format: json or yaml (default: a table)")
	}
}

func (c *common) check() error {
	switch c.output {
	case "", "table", "json", "yaml":
		return nil
	}
	return fmt.Errorf("-o %q: want json or yaml (or nothing, for a table)", c.output)
}

// connect checks the flags and connects to the namespace they name.
func (c *common) connect(ctx context.Context, getenv func(string) string) (*session, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	return connect(ctx, getenv, c.ns)
}

const listSynopsis = `sless list [-n NAMESPACE] [-l SELECTOR] [-o json|yaml]`

func runList(ctx context.Context, stdout io.Writer, getenv func(string) string, args []string) error {
	fs := newFlags("list", listSynopsis)
	var c common
	c.register(fs, true)
	sel := fs.String("l", "", "label selector, e.g. app=web")
	if err := noPositionals(fs, args, "sless describe NAME shows one function"); err != nil {
		return err
	}
	s, err := c.connect(ctx, getenv)
	if err != nil {
		return err
	}
	fns, err := s.api.AllFunctions(ctx, s.ns, client.LabelSelector(*sel))
	if err != nil {
		return err
	}
	return printers.Functions(stdout, c.output, s.ns, fns)
}

const describeSynopsis = `sless describe NAME [-n NAMESPACE] [-o json|yaml]

The function's spec, conditions, URL and last invocations; -o prints the
Function document (as the API and kubectl have it).`

func runDescribe(ctx context.Context, stdout io.Writer, getenv func(string) string, args []string) error {
	fs := newFlags("describe", describeSynopsis)
	var c common
	c.register(fs, true)
	name, err := onePositional(fs, args)
	if err != nil {
		return err
	}
	s, err := c.connect(ctx, getenv)
	if err != nil {
		return err
	}
	fn, err := s.api.GetFunction(ctx, s.ns, name)
	if err != nil {
		return err
	}
	if printers.IsDoc(c.output) {
		return printers.Doc(stdout, c.output, fn)
	}
	if err := printers.Function(stdout, fn); err != nil {
		return err
	}
	page, err := s.api.ListInvocations(ctx, s.ns, name, client.InvocationQuery{Limit: 5})
	return printers.LastInvocations(stdout, page, err)
}

const historySynopsis = `sless history NAME [-n NAMESPACE] [--service] [--status 2xx|4xx|5xx] [--trigger T] [--since 1h] [--limit N] [-o json|yaml]
sless history NAME --async [--state queued|running|succeeded|failed|dead-lettered] [--limit N] [-o json|yaml]`

func runHistory(ctx context.Context, stdout io.Writer, getenv func(string) string, args []string) error {
	fs := newFlags("history", historySynopsis)
	var c common
	c.register(fs, true)
	var q client.InvocationQuery
	fs.StringVar(&q.Status, "status", "", "only answers of this status class (2xx, 4xx, 5xx) or status (504)")
	fs.StringVar(&q.Trigger, "trigger", "", "only calls of this trigger type: http, cron, queue, nats, mqtt, kafka, job or async (attempts of asynchronous calls)")
	asyncCalls := fs.Bool("async", false, "list the asynchronous calls (Prefer: respond-async) with their states instead")
	state := fs.String("state", "", "with --async, only calls in this state: queued, running, succeeded, failed or dead-lettered")
	fs.BoolVar(&q.Service, "service", false, "NAME is a service's (SlessService): its calls through /svc/")
	since := fs.Duration("since", 0, "only calls started within this long, e.g. 1h")
	fs.IntVar(&q.Limit, "limit", 20, "at most this many (1-1000)")
	name, err := onePositional(fs, args)
	if err != nil {
		return err
	}
	var errs []error
	if err := c.check(); err != nil {
		errs = append(errs, err)
	}
	if q.Limit < 1 || q.Limit > 1000 {
		errs = append(errs, fmt.Errorf("--limit must be between 1 and 1000, got %d", q.Limit))
	}
	if *since < 0 {
		errs = append(errs, errors.New("--since must not be negative"))
	}
	switch {
	case *state != "" && !*asyncCalls:
		errs = append(errs, errors.New("--state filters asynchronous calls: give --async too"))
	case *asyncCalls && (q.Status != "" || q.Trigger != "" || q.Service || *since != 0):
		errs = append(errs, errors.New("--async lists asynchronous calls, which --status, --trigger, --service and --since do not filter"))
	case *state != "" && !slices.Contains([]string{"queued", "running", "succeeded", "failed", "dead-lettered"}, *state):
		errs = append(errs, fmt.Errorf("--state %q: want queued, running, succeeded, failed or dead-lettered", *state))
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if *since > 0 {
		q.Since = time.Now().Add(-*since)
	}
	s, err := connect(ctx, getenv, c.ns)
	if err != nil {
		return err
	}
	if *asyncCalls {
		items, err := s.api.ListAsyncInvocations(ctx, s.ns, name, *state, q.Limit)
		if err != nil {
			return err
		}
		return printers.AsyncInvocations(stdout, c.output, s.ns, name, items)
	}
	page, err := s.api.ListInvocations(ctx, s.ns, name, q)
	if err != nil {
		return err
	}
	return printers.InvocationPage(stdout, c.output, s.ns, name, page)
}

const deleteSynopsis = `sless delete NAME [-n NAMESPACE] [--service] [--wait] [--timeout 2m]`

func runDelete(ctx context.Context, stdout io.Writer, getenv func(string) string, args []string) error {
	fs := newFlags("delete", deleteSynopsis)
	var c common
	c.register(fs, false)
	wait := fs.Bool("wait", false, "wait until the function and what it owns are gone")
	timeout := fs.Duration("timeout", 2*time.Minute, "how long --wait waits")
	service := fs.Bool("service", false, "delete the service (SlessService) NAME")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	what := client.KindFunction
	if *service {
		what = client.KindService
	}
	name, err := onePositionalOf(fs, pos, what)
	if err != nil {
		return err
	}
	if *timeout <= 0 {
		return errors.New("--timeout must be positive")
	}
	s, err := c.connect(ctx, getenv)
	if err != nil {
		return err
	}
	if err := s.api.DeleteWorkload(ctx, s.ns, what, name); err != nil {
		return err
	}
	if *wait {
		wctx, cancel := context.WithTimeout(ctx, *timeout)
		defer cancel()
		if err := s.api.WaitGone(wctx, s.ns, what, name); err != nil {
			if wctx.Err() != nil && ctx.Err() == nil {
				return fmt.Errorf("%s %s still exists after %v", what, name, *timeout)
			}
			return err
		}
		fmt.Fprintf(stdout, "%s %s deleted\n", what, name)
		return nil
	}
	fmt.Fprintf(stdout, "%s %s deleted (its cleanup goes on; --wait waits for it)\n", what, name)
	return nil
}
