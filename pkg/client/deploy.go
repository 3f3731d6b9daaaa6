package client

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
)

// Workload is what a deploy waits on: a Function or a SlessService, which
// share their status and its readings.
type Workload interface {
	GetGeneration() int64
	WorkloadStatus() *slessv1alpha1.FunctionStatus
	IsReady() bool
	Failure() (reason, message string, failed bool)
}

// Deploy uploads zipped as the code of the workload m describes in ns, and
// creates it or brings its settings to m's, telling log what it did.
func (c *Client) Deploy(ctx context.Context, ns string, m Manifest, zipped []byte, log io.Writer) (Workload, error) {
	if m.KindOrDefault() == KindService {
		return c.deployService(ctx, ns, m, zipped, log)
	}
	return c.deployFunction(ctx, ns, m, zipped, log)
}

// deployFunction uploads the code and creates the Function or brings its
// settings to the manifest's.
func (c *Client) deployFunction(ctx context.Context, ns string, m Manifest, zipped []byte, log io.Writer) (Workload, error) {
	up, err := c.PutSource(ctx, ns, m.Name, zipped, WithRuntime(m.Runtime), WithEntrypoint(m.Entrypoint))
	if err != nil {
		return nil, err
	}
	fn := up.Function
	if fn == nil {
		// The upload stored the archive; the Function is made with it.
		fn, err = c.CreateFunction(ctx, &slessv1alpha1.Function{
			ObjectMeta: metav1.ObjectMeta{Name: m.Name, Namespace: ns},
			Spec:       m.Spec(slessv1alpha1.FunctionSource{Archive: &up.Archive}),
		})
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(log, "Created function %s.\n", m.Name)
		return fn, nil
	}
	if p := m.Patch(&fn.Spec); p != nil {
		if fn, err = c.PatchFunction(ctx, ns, m.Name, p); err != nil {
			return nil, err
		}
	}
	reportUpdate(log, "function", m.Name, up.Changed)
	return fn, nil
}

// deployService is deployFunction for a SlessService.
func (c *Client) deployService(ctx context.Context, ns string, m Manifest, zipped []byte, log io.Writer) (Workload, error) {
	up, err := c.PutServiceSource(ctx, ns, m.Name, zipped, WithRuntime(m.Runtime), WithEntrypoint(m.Entrypoint))
	if err != nil {
		return nil, err
	}
	svc := up.Service
	if svc == nil {
		svc, err = c.CreateService(ctx, &slessv1alpha1.SlessService{
			ObjectMeta: metav1.ObjectMeta{Name: m.Name, Namespace: ns},
			Spec:       m.ServiceSpec(slessv1alpha1.FunctionSource{Archive: &up.Archive}),
		})
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(log, "Created service %s.\n", m.Name)
		return svc, nil
	}
	if p := m.Patch(svc.BuildSpec()); p != nil {
		if svc, err = c.PatchService(ctx, ns, m.Name, p); err != nil {
			return nil, err
		}
	}
	reportUpdate(log, "service", m.Name, up.Changed)
	return svc, nil
}

func reportUpdate(w io.Writer, kind, name string, changed bool) {
	if changed {
		fmt.Fprintf(w, "Updated %s %s.\n", kind, name)
	} else {
		fmt.Fprintf(w, "%s%s %s already has this code.\n", strings.ToUpper(kind[:1]), kind[1:], name)
	}
}

// WaitReady polls the workload m names in ns until its current generation
// is Ready (with a URL) or Failed, reporting each new state to progress.
func (c *Client) WaitReady(ctx context.Context, ns string, m Manifest, progress func(Workload)) (Workload, error) {
	get := func(ctx context.Context) (Workload, error) {
		fn, err := c.GetFunction(ctx, ns, m.Name)
		if err != nil {
			return nil, err
		}
		return fn, nil
	}
	if m.KindOrDefault() == KindService {
		get = func(ctx context.Context) (Workload, error) {
			svc, err := c.GetService(ctx, ns, m.Name)
			if err != nil {
				return nil, err
			}
			return svc, nil
		}
	}
	return waitReady(ctx, m.KindOrDefault(), m.Name, get, progress)
}

// waitReady polls the Workload until its current generation is Ready
// (with a URL) or Failed, reporting each new state to progress.
func waitReady(ctx context.Context, kind, name string, get func(context.Context) (Workload, error), progress func(Workload)) (Workload, error) {
	tick := time.NewTicker(400 * time.Millisecond)
	defer tick.Stop()
	for {
		w, err := get(ctx)
		if err != nil {
			return nil, err
		}
		progress(w)
		if w.IsReady() && w.WorkloadStatus().URL != "" {
			progress(nil)
			return w, nil
		}
		if reason, msg, failed := w.Failure(); failed {
			progress(nil)
			return nil, fmt.Errorf("%s %s failed (%s): %s", kind, name, reason, msg)
		}
		select {
		case <-ctx.Done():
			progress(nil)
			return nil, ctx.Err()
		case <-tick.C:
		}
	}
}

// Progress returns a reporter of a Workload's state: on a terminal one
// line rewritten in place, otherwise a line per change. nil ends the line.
func Progress(w io.Writer) func(Workload) {
	tty := isTerminal(w)
	last := ""
	start := time.Now()
	return func(wl Workload) {
		if wl == nil {
			if tty && last != "" {
				fmt.Fprintln(w)
			}
			return
		}
		line := stateLine(wl)
		if tty {
			fmt.Fprintf(w, "\r\033[K%s (%ds)", line, int(time.Since(start).Seconds()))
		} else if line != last {
			fmt.Fprintln(w, line)
		}
		last = line
	}
}

// stateLine is "Building  SourceReady ✓  BuildSucceeded …  ServiceReady …: message".
func stateLine(w Workload) string {
	st := w.WorkloadStatus()
	phase := string(st.Phase)
	if phase == "" || st.ObservedGeneration != w.GetGeneration() {
		phase = "Pending"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-9s", phase)
	var msg string
	for _, t := range []string{"SourceReady", "BuildSucceeded", "ServiceReady"} {
		mark := "…"
		if c := meta.FindStatusCondition(st.Conditions, t); c != nil {
			switch c.Status {
			case metav1.ConditionTrue:
				mark = "✓"
			case metav1.ConditionFalse:
				mark = "✗"
				if msg == "" {
					msg = c.Message
				}
			}
		}
		fmt.Fprintf(&b, "  %s %s", t, mark)
	}
	if msg == "" {
		if c := meta.FindStatusCondition(st.Conditions, "Ready"); c != nil && c.Status != metav1.ConditionTrue {
			msg = c.Message
		}
	}
	if msg != "" {
		if len(msg) > 100 {
			msg = msg[:100] + "…"
		}
		b.WriteString(": " + msg)
	}
	return b.String()
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// HumanBytes is n bytes for a person: 12 B, 3.4 KiB, 5.6 MiB.
func HumanBytes(n int) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// DeleteWorkload deletes the function, or the SlessService when kind is
// KindService, named name in ns.
func (c *Client) DeleteWorkload(ctx context.Context, ns, kind, name string) error {
	if kind == KindService {
		return c.DeleteService(ctx, ns, name)
	}
	return c.DeleteFunction(ctx, ns, name)
}

// WaitGone polls until the workload DeleteWorkload deleted, and so what it
// owns, is gone, or ctx is done.
func (c *Client) WaitGone(ctx context.Context, ns, kind, name string) error {
	get := func() error { _, err := c.GetFunction(ctx, ns, name); return err }
	if kind == KindService {
		get = func() error { _, err := c.GetService(ctx, ns, name); return err }
	}
	for {
		err := get()
		if IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}
