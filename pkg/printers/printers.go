// Package printers writes what the sless CLI shows: kubectl-style tables
// and describe blocks, and documents as JSON or YAML for -o.
package printers

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/yaml"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/client"
)

// IsDoc says whether -o asks for a document rather than a table.
func IsDoc(format string) bool { return format == "json" || format == "yaml" }

// Doc writes v as YAML when format is "yaml", else as indented JSON.
func Doc(w io.Writer, format string, v any) error {
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

// list writes items as a list document when output asks for one, else as
// a table of header and a row each, or the line none when there are none.
func list[T any](w io.Writer, output string, items []T, none, header string, row func(*T) string) error {
	if IsDoc(output) {
		if items == nil {
			items = []T{}
		}
		return Doc(w, output, client.List[T]{Items: items})
	}
	if len(items) == 0 {
		fmt.Fprintln(w, none)
		return nil
	}
	tw := newTable(w)
	fmt.Fprintln(tw, header)
	for i := range items {
		fmt.Fprintln(tw, row(&items[i]))
	}
	return tw.Flush()
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

// oneLine folds a message's white space so it keeps to its table row.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func readyStatus(w slessv1alpha1.Workload) string {
	return conditionStatus(w.WorkloadStatus().Conditions, slessv1alpha1.FunctionConditionReady)
}

// conditionStatus is the status of the condition typ, Unknown when missing.
func conditionStatus(conds []metav1.Condition, typ string) string {
	if c := meta.FindStatusCondition(conds, typ); c != nil {
		return string(c.Status)
	}
	return "Unknown"
}

func phaseOf(w slessv1alpha1.Workload) string {
	if p := w.WorkloadStatus().Phase; p != "" {
		return string(p)
	}
	return "Pending"
}
