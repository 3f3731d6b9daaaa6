package printers

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/sless-dev/sless/pkg/secrets"
)

// Secrets writes a namespace's secrets (names, keys and versions, never
// values) as a table, or as a list document when output is json or yaml.
func Secrets(w io.Writer, output, ns string, all []secrets.Info) error {
	return list(w, output, all, "No secrets in namespace "+ns+".", "NAME\tKEYS\tVERSION\tUPDATED\tAGE",
		func(in *secrets.Info) string {
			return strings.Join([]string{in.Metadata.Name, strings.Join(in.Keys, ","), in.Metadata.ResourceVersion,
				age(in.UpdatedAt.Time), age(in.Metadata.CreationTimestamp.Time)}, "\t")
		})
}

// Secret writes one secret as describe shows it, or as a document when
// output is json or yaml.
func Secret(w io.Writer, output string, in *secrets.Info) error {
	if IsDoc(output) {
		return Doc(w, output, in)
	}
	keys := append([]string(nil), in.Keys...)
	sort.Strings(keys)
	tw := newTable(w)
	fmt.Fprintf(tw, "Name:\t%s\n", in.Metadata.Name)
	fmt.Fprintf(tw, "Namespace:\t%s\n", in.Metadata.Namespace)
	fmt.Fprintf(tw, "Keys:\t%s\n", strings.Join(keys, ", "))
	fmt.Fprintf(tw, "Version:\t%s\n", in.Metadata.ResourceVersion)
	fmt.Fprintf(tw, "Created:\t%s (%s ago)\n", in.Metadata.CreationTimestamp.UTC().Format("2006-01-02T15:04:05Z"), age(in.Metadata.CreationTimestamp.Time))
	fmt.Fprintf(tw, "Updated:\t%s (%s ago)\n", in.UpdatedAt.UTC().Format("2006-01-02T15:04:05Z"), age(in.UpdatedAt.Time))
	return tw.Flush()
}
