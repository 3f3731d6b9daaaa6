package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/sless-dev/sless/pkg/client"
	"github.com/sless-dev/sless/pkg/source"
)

func init() {
	register("deploy", "upload a folder as a function's or service's code, create or update it, wait until it is Ready", func(ctx context.Context, args []string) error {
		return runDeploy(ctx, os.Stdout, os.Stderr, os.Getenv, args)
	})
}

const deploySynopsis = `sless deploy [DIR] [-n NAMESPACE] [--name N] [--runtime R] [--entrypoint E] [--service] [--no-wait]

Zip DIR (default .), leaving out .git, __pycache__, node_modules, .venv and
the patterns of DIR/.slessignore; upload it; create the function or update
its code; wait until it is Ready, showing its phase, and print its URL.
DIR/sless.yaml names the function (name, runtime, entrypoint; optional
memoryMB, timeoutSeconds, env, and secretEnv: NAME: SECRET/KEY for a value
of a secret made with sless secret create); flags override it.
With kind: service in sless.yaml, or --service, DIR is a SlessService, a
long-running web app (docs/services.md), which may also set minScale,
maxScale and containerConcurrency; its URL is the /svc/ one.`

type deployOptions struct {
	dir     string
	ns      string
	m       client.Manifest
	wait    bool
	timeout time.Duration
}

// parseDeploy reads the flags and DIR's sless.yaml (flags win) and checks
// the manifest they make.
func parseDeploy(args []string) (deployOptions, error) {
	fs := newFlags("deploy", deploySynopsis)
	var ns string
	fs.StringVar(&ns, "n", "", "namespace (default: the login's)")
	fs.StringVar(&ns, "namespace", "", "namespace (default: the login's)")
	name := fs.String("name", "", "function name (default: sless.yaml's name)")
	rt := fs.String("runtime", "", "runtime: python3.12, nodejs22 or go1.24 (default: sless.yaml's)")
	ep := fs.String("entrypoint", "", "handler, e.g. main.handler (default: sless.yaml's)")
	svc := fs.Bool("service", false, "deploy a service (SlessService), as kind: service in sless.yaml does")
	noWait := fs.Bool("no-wait", false, "do not wait for Ready")
	timeout := fs.Duration("timeout", 10*time.Minute, "how long to wait for Ready")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return deployOptions{}, err
	}
	if len(pos) > 1 {
		return deployOptions{}, fmt.Errorf("one DIR, got %q", pos)
	}
	o := deployOptions{dir: ".", ns: ns, wait: !*noWait, timeout: *timeout}
	if len(pos) == 1 {
		o.dir = pos[0]
	}
	if *timeout <= 0 {
		return deployOptions{}, errors.New("--timeout must be positive")
	}
	st, err := os.Stat(o.dir)
	if err != nil {
		return deployOptions{}, fmt.Errorf("DIR: %w", err)
	}
	if !st.IsDir() {
		return deployOptions{}, fmt.Errorf("DIR %s is not a folder", o.dir)
	}
	m, err := client.ReadManifest(o.dir)
	if err != nil {
		return deployOptions{}, err
	}
	for p, v := range map[*string]string{&m.Name: *name, &m.Runtime: *rt, &m.Entrypoint: *ep} {
		if v != "" {
			*p = v
		}
	}
	if *svc {
		m.Kind = client.KindService
	}
	if err := m.Check(o.dir); err != nil {
		return deployOptions{}, err
	}
	o.m = m
	return o, nil
}

func runDeploy(ctx context.Context, stdout, stderr io.Writer, getenv func(string) string, args []string) error {
	o, err := parseDeploy(args)
	if err != nil {
		return err
	}
	s, err := connect(ctx, getenv, o.ns)
	if err != nil {
		return err
	}
	packed, err := source.PackDir(o.dir)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "Uploading %s (%d files, %s) as %s/%s ...\n", o.dir, packed.Files, client.HumanBytes(len(packed.Zip)), s.ns, o.m.Name)
	w, err := s.api.Deploy(ctx, s.ns, o.m, packed.Zip, stderr)
	if err != nil {
		return err
	}
	if !o.wait {
		fmt.Fprintf(stdout, "%s\n", w.WorkloadStatus().URL)
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	w, err = s.api.WaitReady(wctx, s.ns, o.m, client.Progress(stderr))
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			see := "sless describe " + o.m.Name
			if o.m.KindOrDefault() == client.KindService {
				see = "sless services and sless logs --service " + o.m.Name
			}
			return fmt.Errorf("not Ready after %v; see %s", o.timeout, see)
		}
		return err
	}
	fmt.Fprintf(stdout, "%s\n", w.WorkloadStatus().URL)
	return nil
}
