package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/sless-dev/sless/pkg/adapter/kube"
	"github.com/sless-dev/sless/pkg/queue"
	"github.com/sless-dev/sless/pkg/retry"
)

func init() {
	register("cron-call", "call a function through the invoke proxy as a trigger (the cron runner)", runCronCall)
}

// cronCallSynopsis is the runner's help.
const cronCallSynopsis = "sless cron-call --url {proxy}/fn/{namespace}/{name} --timeout D [--trigger cron|queue] [--payload JSON] [--token-file F]\n\n" +
	"Call a function once as a trigger, with the trigger's credential from $" + kube.EnvToken + " or --token-file.\n" +
	"It runs in a cron trigger's Jobs; it succeeds only on a 2xx answer."

type invokeOptions struct {
	invoker queue.Invoker
	trigger string
	payload []byte
}

// parseInvoke reads the flags and the environment of `sless cron-call`. The
// credential and the payload come from the environment (SLESS_TOKEN,
// SLESS_PAYLOAD) so that they stay out of the process list.
func parseInvoke(args []string, getenv func(string) string) (invokeOptions, error) {
	fs := newFlags("cron-call", cronCallSynopsis)
	u := fs.String("url", "", "the function's invoke URL, {proxy}/fn/{namespace}/{name}")
	trig := fs.String("trigger", "cron", "trigger type the call is recorded with: cron or queue")
	timeout := fs.Duration("timeout", 0, "how long to wait for the answer (the function's timeout plus a cold start)")
	payload := fs.String("payload", "", "JSON body of the call (default: $"+kube.EnvPayload+")")
	tokenFile := fs.String("token-file", "", "file holding the trigger's credential (default: $"+kube.EnvToken+")")
	if err := parseFlags(fs, args); err != nil {
		return invokeOptions{}, err
	}
	if fs.NArg() > 0 {
		return invokeOptions{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	o := invokeOptions{trigger: *trig}
	var errs []error
	if err := checkFunctionURL(*u); err != nil {
		errs = append(errs, err)
	}
	if *trig != "cron" && *trig != "queue" {
		errs = append(errs, fmt.Errorf("--trigger must be cron or queue, got %q", *trig))
	}
	if *timeout <= 0 {
		errs = append(errs, errors.New("--timeout is required and must be positive, e.g. --timeout=90s"))
	}
	token := getenv(kube.EnvToken)
	if *tokenFile != "" {
		b, err := os.ReadFile(*tokenFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("--token-file: %w", err))
		}
		token = strings.TrimSpace(string(b))
	}
	if token == "" {
		errs = append(errs, errors.New("no credential: set $"+kube.EnvToken+" or --token-file"))
	}
	body := *payload
	if body == "" {
		body = getenv(kube.EnvPayload)
	}
	if body != "" && !json.Valid([]byte(body)) {
		errs = append(errs, errors.New("the payload is not valid JSON"))
	}
	if len(errs) > 0 {
		return invokeOptions{}, errors.Join(errs...)
	}
	o.payload = []byte(body)
	o.invoker = queue.Invoker{URL: *u, Token: token, Timeout: *timeout}
	return o, nil
}

// checkFunctionURL insists on an http(s) URL of the form the proxy serves.
func checkFunctionURL(raw string) error {
	if raw == "" {
		return errors.New("--url is required: {proxy}/fn/{namespace}/{name}")
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--url %q must be an http:// or https:// URL", raw)
	}
	parts := strings.Split(strings.TrimPrefix(u.Path, "/"), "/")
	if len(parts) < 3 || parts[len(parts)-3] != "fn" || parts[len(parts)-2] == "" || parts[len(parts)-1] == "" {
		return fmt.Errorf("--url %q must end in /fn/{namespace}/{name}", raw)
	}
	return nil
}

// runCronCall makes one call and succeeds only on a 2xx answer, so a failed
// run shows as a failed Job of the CronJob. The function's answer goes to
// stdout (the Job's log).
func runCronCall(ctx context.Context, args []string) error {
	o, err := parseInvoke(args, os.Getenv)
	if err != nil {
		return err
	}
	ct := ""
	if len(o.payload) > 0 {
		ct = "application/json"
	}
	start := time.Now()
	out := o.invoker.InvokeReachable(ctx, queue.Call{Trigger: o.trigger, Body: o.payload, ContentType: ct}, unreachableWait, retry.Sleep, os.Stderr)
	if len(out.Body) > 0 {
		fmt.Fprintf(os.Stdout, "%s\n", out.Body)
	}
	if !out.OK() {
		return fmt.Errorf("%s answered %s after %v", o.invoker.URL, out, time.Since(start).Round(time.Millisecond))
	}
	fmt.Fprintf(os.Stderr, "sless cron-call: %s answered %d after %v\n", o.invoker.URL, out.Status, time.Since(start).Round(time.Millisecond))
	return nil
}

// unreachableWait is how long a run waits for the proxy to accept its
// connection: long enough for sless-api to be rolled out or rescheduled.
// The Job's activeDeadlineSeconds leaves room for it.
const unreachableWait = kube.UnreachableAllowanceSeconds * time.Second
