package printers

import (
	"fmt"
	"io"
	"strings"
	"time"

	"k8s.io/utils/ptr"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
)

// Functions writes a namespace's functions as a table, or as a list
// document when output is json or yaml.
func Functions(w io.Writer, output, ns string, fns []slessv1alpha1.Function) error {
	return list(w, output, fns, "No functions in namespace "+ns+".", "NAME\tRUNTIME\tPHASE\tREADY\tURL\tAGE",
		func(fn *slessv1alpha1.Function) string {
			return strings.Join([]string{fn.Name, orNone(fn.Spec.Runtime), phaseOf(fn), readyStatus(fn), orNone(fn.Status.URL), age(fn.CreationTimestamp.Time)}, "\t")
		})
}

// Services writes a namespace's SlessServices as a table, or as a list
// document when output is json or yaml.
func Services(w io.Writer, output, ns string, svcs []slessv1alpha1.SlessService) error {
	return list(w, output, svcs, "No services in namespace "+ns+".", "NAME\tRUNTIME\tPHASE\tREADY\tMIN\tURL\tAGE",
		func(sv *slessv1alpha1.SlessService) string {
			return fmt.Sprintf("%s\t%s\t%s\t%s\t%d\t%s\t%s", sv.Name, orNone(sv.Spec.Runtime), phaseOf(sv), readyStatus(sv),
				*sv.BuildSpec().Scale.Min, orNone(sv.Status.URL), age(sv.CreationTimestamp.Time))
		})
}

// Function writes a function's spec, status and conditions as describe
// shows them.
func Function(w io.Writer, fn *slessv1alpha1.Function) error {
	tw := newTable(w)
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
	fmt.Fprintln(w, "\nConditions:")
	if len(fn.Status.Conditions) == 0 {
		fmt.Fprintln(w, "  <none>")
		return nil
	}
	tw = newTable(w)
	fmt.Fprintln(tw, "  TYPE\tSTATUS\tREASON\tAGE\tMESSAGE")
	for _, cd := range fn.Status.Conditions {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", cd.Type, cd.Status, orNone(cd.Reason), age(cd.LastTransitionTime.Time), oneLine(cd.Message))
	}
	return tw.Flush()
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
