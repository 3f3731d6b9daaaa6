package printers

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/client"
)

// Revisions writes a workload's revisions, newest first, as a table, or
// as a list document when output is json or yaml. kind and name say whose
// they are.
func Revisions(w io.Writer, output, kind, name string, revs []client.Revision) error {
	return list(w, output, revs, kind+" "+name+" has no revision yet.", "NAME\tTRAFFIC\tTAGS\tREADY\tSOURCE\tIMAGE\tAGE",
		func(r *client.Revision) string {
			traffic := strconv.FormatInt(r.Percent, 10) + "%"
			if r.Latest {
				traffic += " (latest)"
			}
			var tags []string
			for _, t := range r.Tags {
				tags = append(tags, t.Tag+" "+t.URL)
			}
			ready := "True"
			if !r.Ready {
				ready = "False"
				if r.Reason != "" {
					ready += " (" + r.Reason + ")"
				}
			}
			return strings.Join([]string{r.Name, traffic, orNone(strings.Join(tags, ", ")), ready,
				orNone(shortDigest(r.SourceDigest)), orNone(r.Image), age(r.Created)}, "\t")
		})
}

// shortDigest is sha256:<12 hex digits> of a digest, as a table shows it.
func shortDigest(d string) string {
	if len(d) > len("sha256:")+12 {
		return d[:len("sha256:")+12]
	}
	return d
}

// Traffic writes the split a workload serves on one line:
// "function hello: 90% hello-00002, 10% hello-00001 (canary)".
func Traffic(w io.Writer, kind, name string, traffic []slessv1alpha1.TrafficTarget) {
	var parts []string
	for _, t := range traffic {
		p := fmt.Sprintf("%d%% %s", t.PercentOf(), t.RevisionName)
		if t.Tag != "" {
			p += " (" + t.Tag + ")"
		}
		parts = append(parts, p)
	}
	fmt.Fprintf(w, "%s %s: %s\n", kind, name, strings.Join(parts, ", "))
}
