package printers

import (
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/sless-dev/sless/pkg/client"
)

// Invocations writes records as a table, each row starting with indent.
func Invocations(w io.Writer, indent string, items []client.Invocation) error {
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

// InvocationPage writes a page of a function's records as a table, or as
// a document when output is json or yaml.
func InvocationPage(w io.Writer, output, ns, name string, page *client.List[client.Invocation]) error {
	if IsDoc(output) {
		if page.Items == nil {
			page.Items = []client.Invocation{}
		}
		return Doc(w, output, page)
	}
	if len(page.Items) == 0 {
		fmt.Fprintf(w, "No invocations of %s/%s match.\n", ns, name)
		return nil
	}
	return Invocations(w, "", page.Items)
}

// LastInvocations is describe's section of a function's last calls; err
// is the listing's, which a server that keeps no records answers with 501.
func LastInvocations(w io.Writer, page *client.List[client.Invocation], err error) error {
	fmt.Fprintln(w, "\nLast invocations:")
	switch {
	case client.StatusOf(err) == http.StatusNotImplemented:
		fmt.Fprintln(w, "  <this server keeps no invocation history>")
		return nil
	case err != nil:
		return err
	case len(page.Items) == 0:
		fmt.Fprintln(w, "  <none>")
		return nil
	}
	return Invocations(w, "  ", page.Items)
}

// AsyncInvocations writes a function's asynchronous calls as a table, or
// as a document when output is json or yaml.
func AsyncInvocations(w io.Writer, output, ns, name string, items []client.AsyncInvocation) error {
	if IsDoc(output) {
		return Doc(w, output, map[string]any{"items": items})
	}
	if len(items) == 0 {
		fmt.Fprintf(w, "No asynchronous calls of %s/%s match.\n", ns, name)
		return nil
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "ACCEPTED\tSTATE\tATTEMPTS\tSTATUS\tCALLBACK\tREQUEST ID\tERROR")
	for _, a := range items {
		status, cb, errText := "-", "-", a.LastError
		if a.Response != nil {
			status = fmt.Sprint(a.Response.Status)
		}
		if c := a.Callback; c != nil {
			cb = string(c.State)
			if errText == "" && c.LastError != "" {
				errText = "callback: " + c.LastError
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", a.AcceptedAt.Local().Format("2006-01-02 15:04:05"), a.State, a.Attempts,
			status, cb, a.RequestID, oneLine(errText))
	}
	return tw.Flush()
}
