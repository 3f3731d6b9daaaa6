package main

import (
	"context"
	"fmt"
	"io"
	"os"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/client"
)

func init() {
	register("services", "list the services (SlessServices) of a namespace", func(ctx context.Context, args []string) error {
		return runServices(ctx, os.Stdout, os.Getenv, args)
	})
}

const servicesSynopsis = `sless services [-n NAMESPACE] [-l SELECTOR] [-o json|yaml]

The namespace's SlessServices, long-running web apps (docs/services.md).`

func runServices(ctx context.Context, stdout io.Writer, getenv func(string) string, args []string) error {
	fs := newFlags("services", servicesSynopsis)
	var c common
	c.register(fs, true)
	sel := fs.String("l", "", "label selector, e.g. app=web")
	if err := noPositionals(fs, args, ""); err != nil {
		return err
	}
	s, err := c.connect(ctx, getenv)
	if err != nil {
		return err
	}
	svcs, err := s.api.AllServices(ctx, s.ns, client.LabelSelector(*sel))
	if err != nil {
		return err
	}
	return printServices(stdout, c.output, s.ns, svcs)
}

func printServices(stdout io.Writer, output, ns string, svcs []slessv1alpha1.SlessService) error {
	if output == "json" || output == "yaml" {
		if svcs == nil {
			svcs = []slessv1alpha1.SlessService{}
		}
		return printDoc(stdout, output, client.List[slessv1alpha1.SlessService]{Items: svcs})
	}
	if len(svcs) == 0 {
		fmt.Fprintf(stdout, "No services in namespace %s.\n", ns)
		return nil
	}
	tw := newTable(stdout)
	fmt.Fprintln(tw, "NAME\tRUNTIME\tPHASE\tREADY\tMIN\tURL\tAGE")
	for i := range svcs {
		sv := &svcs[i]
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", sv.Name, orNone(sv.Spec.Runtime), phaseOf(sv), readyStatus(sv),
			*sv.BuildSpec().Scale.Min, orNone(sv.Status.URL), age(sv.CreationTimestamp.Time))
	}
	return tw.Flush()
}
