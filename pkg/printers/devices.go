package printers

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
)

// Devices writes a namespace's IoTDevices as a table, or as a list
// document when output is json or yaml.
func Devices(w io.Writer, output, ns string, all []slessv1alpha1.IoTDevice) error {
	return list(w, output, all, "No devices in namespace "+ns+".", "NAME\tENABLED\tREADY\tMESSAGES\tLAST SEEN\tAGE",
		func(d *slessv1alpha1.IoTDevice) string {
			seen := "<never>"
			if d.Status.LastSeen != nil {
				seen = age(d.Status.LastSeen.Time) + " ago"
			}
			return strings.Join([]string{d.Name, strconv.FormatBool(d.IsEnabled()), conditionStatus(d.Status.Conditions, slessv1alpha1.DeviceConditionReady),
				strconv.FormatInt(d.Status.MessagesIn, 10), seen, age(d.CreationTimestamp.Time)}, "\t")
		})
}

// Device writes one device as describe shows it, or as a document when
// output is json or yaml.
func Device(w io.Writer, output string, d *slessv1alpha1.IoTDevice) error {
	if IsDoc(output) {
		return Doc(w, output, d)
	}
	tw := newTable(w)
	fmt.Fprintf(tw, "Name:\t%s\n", d.Name)
	fmt.Fprintf(tw, "Namespace:\t%s\n", d.Namespace)
	fmt.Fprintf(tw, "Enabled:\t%t\n", d.IsEnabled())
	fmt.Fprintf(tw, "Username:\t%s\n", orNone(d.Status.Username))
	fmt.Fprintf(tw, "Credentials:\tSecret %s\n", orNone(d.Status.CredentialsSecret))
	fmt.Fprintf(tw, "Function:\t%s\n", orNone(d.Spec.Function))
	fmt.Fprintf(tw, "Trigger:\t%s\n", orNone(d.Spec.Trigger))
	keys := make([]string, 0, len(d.Spec.Attributes))
	for k := range d.Spec.Attributes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	attrs := make([]string, len(keys))
	for i, k := range keys {
		attrs[i] = k + "=" + d.Spec.Attributes[k]
	}
	fmt.Fprintf(tw, "Attributes:\t%s\n", orNone(strings.Join(attrs, ", ")))
	fmt.Fprintf(tw, "Messages in:\t%d\n", d.Status.MessagesIn)
	fmt.Fprintf(tw, "Commands out:\t%d\n", d.Status.CommandsOut)
	if d.Status.LastSeen != nil {
		fmt.Fprintf(tw, "Last seen:\t%s (%s ago)\n", d.Status.LastSeen.UTC().Format("2006-01-02T15:04:05Z"), age(d.Status.LastSeen.Time))
	} else {
		fmt.Fprintf(tw, "Last seen:\t<never>\n")
	}
	fmt.Fprintf(tw, "Conditions:\n")
	for _, c := range d.Status.Conditions {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", c.Type, c.Status, c.Reason, oneLine(c.Message))
	}
	return tw.Flush()
}
