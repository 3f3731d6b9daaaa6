package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/client"
	"github.com/sless-dev/sless/pkg/printers"
)

func init() {
	registerOut("revisions", "list a function's or service's revisions with their share of the calls and tag URLs", runRevisions)
	registerOut("rollout", "send a share of the calls to the latest revision (--percent), or all of them (--promote)", runRollout)
	registerOut("rollback", "send every call to the previous ready revision, or to --to REV, without a build", runRollback)
}

// trafficFlags are the flags revisions, rollout and rollback share.
type trafficFlags struct {
	common
	service bool
	timeout time.Duration
}

func (f *trafficFlags) register(name, synopsis string, outputs, waits bool) *flag.FlagSet {
	fs := newFlags(name, synopsis)
	f.common.register(fs, outputs)
	fs.BoolVar(&f.service, "service", false, "NAME is a service's (SlessService)")
	if waits {
		fs.DurationVar(&f.timeout, "timeout", 2*time.Minute, "how long to wait for the new split to serve")
	}
	return fs
}

// parse parses args and wants one NAME, of a function or, with --service,
// a service.
func (f *trafficFlags) parse(fs *flag.FlagSet, args []string) (string, error) {
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return "", err
	}
	return onePositionalOf(fs, pos, f.kind())
}

func (f *trafficFlags) kind() string {
	if f.service {
		return client.KindService
	}
	return client.KindFunction
}

const revisionsSynopsis = `sless revisions NAME [-n NAMESPACE] [--service] [-o json|yaml]

The revisions, newest first: when each was made, from which source, the
image it runs, whether it is ready, its share of the calls and the URLs of
its tags.`

func runRevisions(ctx context.Context, stdout io.Writer, getenv func(string) string, args []string) error {
	var f trafficFlags
	fs := f.register("revisions", revisionsSynopsis, true, false)
	name, err := f.parse(fs, args)
	if err != nil {
		return err
	}
	s, err := f.connect(ctx, getenv)
	if err != nil {
		return err
	}
	revs, err := s.api.ListRevisions(ctx, s.ns, name, f.service)
	if err != nil {
		return err
	}
	return printers.Revisions(stdout, f.output, f.kind(), name, revs)
}

const rolloutSynopsis = `sless rollout NAME --percent P [-n NAMESPACE] [--service] [--timeout 2m]
sless rollout NAME --promote [-n NAMESPACE] [--service] [--timeout 2m]

--percent sends P% of the calls to the latest ready revision and the rest
to the revision that takes the most of them now (or, when the latest takes
them all, to the ready revision before it). --promote sends them all to
the latest. Tags stay on their revisions. No build runs.`

func runRollout(ctx context.Context, stdout io.Writer, getenv func(string) string, args []string) error {
	var f trafficFlags
	fs := f.register("rollout", rolloutSynopsis, false, true)
	percent := fs.Int64("percent", -1, "the latest revision's share of the calls, 0 to 100")
	promote := fs.Bool("promote", false, "send every call to the latest revision")
	name, err := f.parse(fs, args)
	if err != nil {
		return err
	}
	switch {
	case *promote && *percent >= 0:
		return errors.New("--percent and --promote: give one")
	case !*promote && *percent < 0:
		return errors.New("--percent P (0 to 100) or --promote is required")
	case *percent > 100:
		return fmt.Errorf("--percent %d: want 0 to 100", *percent)
	case f.timeout <= 0:
		return errors.New("--timeout must be positive")
	}
	if *promote {
		*percent = 100
	}
	s, err := f.connect(ctx, getenv)
	if err != nil {
		return err
	}
	spec, st, err := s.api.Traffic(ctx, s.ns, f.kind(), name)
	if err != nil {
		return err
	}
	latest := st.LatestReadyRevision
	if latest == "" {
		return fmt.Errorf("%s %s has no ready revision yet", f.kind(), name)
	}
	stable := ""
	if *percent < 100 {
		revs, err := s.api.ListRevisions(ctx, s.ns, name, f.service)
		if err != nil {
			return err
		}
		if stable, err = client.StableRevision(revs, latest); err != nil {
			return fmt.Errorf("%s %s: nothing to roll out from: %w", f.kind(), name, err)
		}
	}
	return setTraffic(ctx, stdout, s, &f, name, client.Rollout(spec, stable, *percent))
}

const rollbackSynopsis = `sless rollback NAME [--to REV] [-n NAMESPACE] [--service] [--timeout 2m]

Sends every call to REV, by default the newest ready revision older than
the one that takes the most calls now, in one step and without a build.
Tags stay on their revisions with no share. sless rollout --promote
returns to the latest revision.`

func runRollback(ctx context.Context, stdout io.Writer, getenv func(string) string, args []string) error {
	var f trafficFlags
	fs := f.register("rollback", rollbackSynopsis, false, true)
	to := fs.String("to", "", "the revision to send every call to (sless revisions NAME lists them)")
	name, err := f.parse(fs, args)
	if err != nil {
		return err
	}
	if f.timeout <= 0 {
		return errors.New("--timeout must be positive")
	}
	s, err := f.connect(ctx, getenv)
	if err != nil {
		return err
	}
	spec, _, err := s.api.Traffic(ctx, s.ns, f.kind(), name)
	if err != nil {
		return err
	}
	revs, err := s.api.ListRevisions(ctx, s.ns, name, f.service)
	if err != nil {
		return err
	}
	target, err := client.RollbackTarget(revs, *to)
	switch {
	case err != nil && *to == "":
		return fmt.Errorf("%s %s: nothing to roll back to: %w", f.kind(), name, err)
	case err != nil:
		return fmt.Errorf("--to %s: %s %s: %w", *to, f.kind(), name, err)
	}
	return setTraffic(ctx, stdout, s, &f, name, client.Rollback(spec, target))
}

// setTraffic writes traffic and waits until it serves, then prints it.
func setTraffic(ctx context.Context, stdout io.Writer, s *session, f *trafficFlags, name string, traffic []slessv1alpha1.TrafficTarget) error {
	wctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	w, err := s.api.SetTraffic(wctx, s.ns, f.kind(), name, traffic)
	if err != nil {
		if wctx.Err() != nil && ctx.Err() == nil {
			return fmt.Errorf("%s %s does not serve the new split after %v", f.kind(), name, f.timeout)
		}
		return err
	}
	printers.Traffic(stdout, f.kind(), name, w.WorkloadStatus().Traffic)
	return nil
}
