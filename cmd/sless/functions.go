package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/client"
)

func init() {
	register("list", "list the functions of a namespace", func(ctx context.Context, args []string) error {
		return runList(ctx, os.Stdout, os.Getenv, args)
	})
	register("describe", "show a function: spec, conditions, URL, last invocations", func(ctx context.Context, args []string) error {
		return runDescribe(ctx, os.Stdout, os.Getenv, args)
	})
	register("history", "list a function's invocations, newest first", func(ctx context.Context, args []string) error {
		return runHistory(ctx, os.Stdout, os.Getenv, args)
	})
	register("delete", "delete a function, or a service with --service", func(ctx context.Context, args []string) error {
		return runDelete(ctx, os.Stdout, os.Getenv, args)
	})
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

// noPositionals parses args of a subcommand that takes no NAME; hint, if
// any, says which one does.
func noPositionals(fs *flag.FlagSet, args []string, hint string) error {
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return nil
	}
	if hint != "" {
		return fmt.Errorf("unexpected arguments %q (%s)", pos, hint)
	}
	return fmt.Errorf("unexpected arguments %q", pos)
}

// onePositional parses args and wants exactly one NAME, a function's.
func onePositional(fs *flag.FlagSet, args []string) (string, error) {
	return onePositionalOf(fs, args, "function")
}

// onePositionalOf parses args and wants exactly one NAME of a what.
func onePositionalOf(fs *flag.FlagSet, args []string, what string) (string, error) {
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return "", err
	}
	switch len(pos) {
	case 0:
		return "", fmt.Errorf("the %s's NAME is required", what)
	case 1:
		return pos[0], nil
	}
	return "", fmt.Errorf("one NAME, got %q", pos)
}

// printDoc writes v as JSON or YAML.
func printDoc(w io.Writer, format string, v any) error {
	if format == "yaml" {
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// newTable is kubectl's table layout.
func newTable(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 8, 3, ' ', 0) }

func age(t time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(time.Since(t))
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

func readyStatus(fn slessv1alpha1.Workload) string {
	if c := meta.FindStatusCondition(fn.WorkloadStatus().Conditions, slessv1alpha1.FunctionConditionReady); c != nil {
		return string(c.Status)
	}
	return "Unknown"
}

func phaseOf(fn slessv1alpha1.Workload) string {
	if p := fn.WorkloadStatus().Phase; p != "" {
		return string(p)
	}
	return "Pending"
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
	if c.output == "json" || c.output == "yaml" {
		if fns == nil {
			fns = []slessv1alpha1.Function{}
		}
		return printDoc(stdout, c.output, client.List[slessv1alpha1.Function]{Items: fns})
	}
	if len(fns) == 0 {
		fmt.Fprintf(stdout, "No functions in namespace %s.\n", s.ns)
		return nil
	}
	tw := newTable(stdout)
	fmt.Fprintln(tw, "NAME\tRUNTIME\tPHASE\tREADY\tURL\tAGE")
	for i := range fns {
		fn := &fns[i]
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", fn.Name, orNone(fn.Spec.Runtime), phaseOf(fn), readyStatus(fn), orNone(fn.Status.URL), age(fn.CreationTimestamp.Time))
	}
	return tw.Flush()
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
	if c.output == "json" || c.output == "yaml" {
		return printDoc(stdout, c.output, fn)
	}
	tw := newTable(stdout)
	row := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, v) }
	row("Name", fn.Name)
	row("Namespace", fn.Namespace)
	row("Runtime", orNone(fn.Spec.Runtime))
	row("Entrypoint", orNone(fn.Spec.Entrypoint))
	row("Source", sourceSummary(fn))
	row("Memory", fmt.Sprintf("%d MiB", ptr.Deref(fn.Spec.MemoryMB, int32(slessv1alpha1.DefaultMemoryMB))))
	row("Timeout", fmt.Sprintf("%ds", fn.Timeout()))
	if sc := fn.Spec.Scale; sc != nil {
		row("Scale", scaleSummary(sc))
	}
	if len(fn.Spec.Env) > 0 {
		names := make([]string, len(fn.Spec.Env))
		for i, e := range fn.Spec.Env {
			names[i] = e.Name
		}
		row("Env", strings.Join(names, ", "))
	}
	row("Phase", phaseOf(fn))
	row("URL", orNone(fn.Status.URL))
	row("Image", orNone(fn.Status.Image))
	row("Revision", orNone(fn.Status.LatestReadyRevision))
	row("Created", fmt.Sprintf("%s (%s ago)", fn.CreationTimestamp.UTC().Format(time.RFC3339), age(fn.CreationTimestamp.Time)))
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "\nConditions:")
	if len(fn.Status.Conditions) == 0 {
		fmt.Fprintln(stdout, "  <none>")
	} else {
		tw = newTable(stdout)
		fmt.Fprintln(tw, "  TYPE\tSTATUS\tREASON\tAGE\tMESSAGE")
		for _, cd := range fn.Status.Conditions {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", cd.Type, cd.Status, orNone(cd.Reason), age(cd.LastTransitionTime.Time), oneLine(cd.Message))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintln(stdout, "\nLast invocations:")
	page, err := s.api.ListInvocations(ctx, s.ns, name, client.InvocationQuery{Limit: 5})
	switch {
	case client.StatusOf(err) == http.StatusNotImplemented:
		fmt.Fprintln(stdout, "  <this server keeps no invocation history>")
		return nil
	case err != nil:
		return err
	case len(page.Items) == 0:
		fmt.Fprintln(stdout, "  <none>")
		return nil
	}
	return invocationTable(stdout, "  ", page.Items)
}

func sourceSummary(fn *slessv1alpha1.Function) string {
	src := fn.Spec.Source
	switch {
	case src.Image != "":
		return "image " + src.Image
	case src.Archive != nil:
		sum := src.Archive.SHA256
		if len(sum) > 12 {
			sum = sum[:12]
		}
		return "archive sha256:" + sum
	case src.Inline != nil:
		return fmt.Sprintf("inline, %d files", len(src.Inline.Files))
	}
	return "<none>"
}

func scaleSummary(sc *slessv1alpha1.ScaleSpec) string {
	var parts []string
	if sc.Min != nil {
		parts = append(parts, fmt.Sprintf("min %d", *sc.Min))
	}
	if sc.Max != nil {
		parts = append(parts, fmt.Sprintf("max %d", *sc.Max))
	}
	if sc.Target != nil {
		parts = append(parts, fmt.Sprintf("target %d", *sc.Target))
	}
	if sc.ContainerConcurrency != nil {
		parts = append(parts, fmt.Sprintf("containerConcurrency %d", *sc.ContainerConcurrency))
	}
	return orNone(strings.Join(parts, ", "))
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func invocationTable(w io.Writer, indent string, items []client.Invocation) error {
	tw := newTable(w)
	fmt.Fprintf(tw, "%sSTARTED\tSTATUS\tDURATION\tTRIGGER\tREVISION\tCOLD\tIN\tOUT\tREQUEST ID\tERROR\n", indent)
	for _, iv := range items {
		cold := ""
		if iv.ColdStart {
			cold = "yes"
		}
		fmt.Fprintf(tw, "%s%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", indent, iv.StartedAt.Local().Format("2006-01-02 15:04:05"), iv.Status,
			(time.Duration(iv.DurationMs * float64(time.Millisecond))).Round(time.Millisecond/10), iv.Trigger, orNone(iv.Revision), cold,
			client.HumanBytes(int(iv.BytesIn)), client.HumanBytes(int(iv.BytesOut)), iv.RequestID, oneLine(iv.Error))
	}
	return tw.Flush()
}

const historySynopsis = `sless history NAME [-n NAMESPACE] [--service] [--status 2xx|4xx|5xx] [--trigger T] [--since 1h] [--limit N] [-o json|yaml]
sless history NAME --async [--state queued|running|succeeded|failed|dead-lettered] [--limit N] [-o json|yaml]`

func runHistory(ctx context.Context, stdout io.Writer, getenv func(string) string, args []string) error {
	fs := newFlags("history", historySynopsis)
	var c common
	c.register(fs, true)
	var q client.InvocationQuery
	fs.StringVar(&q.Status, "status", "", "only answers of this status class (2xx, 4xx, 5xx) or status (504)")
	fs.StringVar(&q.Trigger, "trigger", "", "only calls of this trigger type: http, cron, queue, nats, job or async (attempts of asynchronous calls)")
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
		return asyncHistory(ctx, stdout, s.api, s.ns, name, *state, q.Limit, c.output)
	}
	page, err := s.api.ListInvocations(ctx, s.ns, name, q)
	if err != nil {
		return err
	}
	if c.output == "json" || c.output == "yaml" {
		if page.Items == nil {
			page.Items = []client.Invocation{}
		}
		return printDoc(stdout, c.output, page)
	}
	if len(page.Items) == 0 {
		fmt.Fprintf(stdout, "No invocations of %s/%s match.\n", s.ns, name)
		return nil
	}
	return invocationTable(stdout, "", page.Items)
}

// asyncHistory lists a function's asynchronous calls, newest first.
func asyncHistory(ctx context.Context, stdout io.Writer, api *client.Client, ns, name, state string, limit int, output string) error {
	items, err := api.ListAsyncInvocations(ctx, ns, name, state, limit)
	if err != nil {
		return err
	}
	if output == "json" || output == "yaml" {
		return printDoc(stdout, output, map[string]any{"items": items})
	}
	if len(items) == 0 {
		fmt.Fprintf(stdout, "No asynchronous calls of %s/%s match.\n", ns, name)
		return nil
	}
	tw := newTable(stdout)
	fmt.Fprintln(tw, "ACCEPTED\tSTATE\tATTEMPTS\tSTATUS\tCALLBACK\tREQUEST ID\tERROR")
	for _, a := range items {
		status, cb, errText := "-", "-", a.LastError
		if a.Response != nil {
			status = fmt.Sprint(a.Response.Status)
		}
		if c := a.Callback; c != nil {
			cb = c.State
			if errText == "" && c.LastError != "" {
				errText = "callback: " + c.LastError
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", a.AcceptedAt.Local().Format("2006-01-02 15:04:05"), a.State, a.Attempts,
			status, cb, a.RequestID, oneLine(errText))
	}
	return tw.Flush()
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
