package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/devices"
	"github.com/sless-dev/sless/pkg/printers"
)

func init() {
	registerOut("device", "IoT devices with MQTT credentials of their own: create, list, describe, rotate, disable, enable, delete", runDevice)
}

const deviceSynopsis = `sless device create NAME [--attribute KEY=VALUE]... [--function F | --trigger T] [--disabled] [-n NAMESPACE]
sless device list [-n NAMESPACE] [-o json|yaml]
sless device describe NAME [-n NAMESPACE] [-o json|yaml]
sless device rotate NAME [-n NAMESPACE]
sless device disable NAME [-n NAMESPACE]
sless device enable NAME [-n NAMESPACE]
sless device delete NAME [-n NAMESPACE]

A device connects to the MQTT broker as {namespace}/{name} with the
password create and rotate print, once: sless keeps only its hash. It
publishes under devices/{namespace}/{name}/ and subscribes under
commands/{namespace}/{name}/. disable refuses it and closes its
connection; rotate closes the connections made with the old password.
docs/devices.md tells the whole story.`

func runDevice(ctx context.Context, stdout io.Writer, getenv func(string) string, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		return parseFlags(newFlags("device", deviceSynopsis), []string{"-h"})
	}
	switch sub, rest := args[0], args[1:]; sub {
	case "create":
		return runDeviceCreate(ctx, stdout, getenv, rest)
	case "list":
		return runDeviceList(ctx, stdout, getenv, rest)
	case "describe", "get", "rotate", "disable", "enable", "delete":
		return runDeviceOne(ctx, stdout, getenv, sub, rest)
	default:
		return fmt.Errorf("sless device %s: unknown; want create, list, describe, rotate, disable, enable or delete", sub)
	}
}

func runDeviceCreate(ctx context.Context, stdout io.Writer, getenv func(string) string, args []string) error {
	fs := newFlags("device create", deviceSynopsis)
	var c common
	c.register(fs, false)
	var attrs stringList
	fs.Var(&attrs, "attribute", "KEY=VALUE describing the device; repeat for more (kept and shown; docs/devices.md)")
	function := fs.String("function", "", "the function meant to get the device's messages (kept and shown; docs/devices.md)")
	trigger := fs.String("trigger", "", "the mqtt trigger meant to get the device's messages (kept and shown; docs/devices.md)")
	disabled := fs.Bool("disabled", false, "create it disabled: it cannot connect until enabled")
	name, err := onePositionalOf(fs, args, "device")
	if err != nil {
		return err
	}
	d := &slessv1alpha1.IoTDevice{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: slessv1alpha1.IoTDeviceSpec{Function: *function, Trigger: *trigger, Enabled: ptr.To(!*disabled)}}
	for _, a := range attrs {
		k, v, ok := strings.Cut(a, "=")
		if !ok || k == "" {
			return fmt.Errorf("--attribute %q: want KEY=VALUE", a)
		}
		if d.Spec.Attributes == nil {
			d.Spec.Attributes = map[string]string{}
		}
		if _, dup := d.Spec.Attributes[k]; dup {
			return fmt.Errorf("--attribute %s given twice", k)
		}
		d.Spec.Attributes[k] = v
	}
	if errs := slessv1alpha1.ValidateIoTDevice(d); len(errs) > 0 {
		return fmt.Errorf("device %s: %w", name, errs.ToAggregate())
	}
	s, err := c.connect(ctx, getenv)
	if err != nil {
		return err
	}
	d.Namespace = s.ns
	if _, err := s.api.CreateDevice(ctx, d); err != nil {
		return err
	}
	// The controller's first password sits in the device's Secret; a
	// rotation now shows one here and leaves only its hash there.
	cr, err := s.api.RotateDevice(ctx, s.ns, name)
	if err != nil {
		return fmt.Errorf("device %s created, but its password could not be issued (sless device rotate %s tries again): %w", name, name, err)
	}
	fmt.Fprintf(stdout, "device %s created\n", name)
	printCredentials(stdout, cr)
	return nil
}

func printCredentials(w io.Writer, cr *devices.Credentials) {
	ns, name, _ := devices.ParseUsername(cr.Username)
	fmt.Fprintf(w, "username: %s\npassword: %s\n", cr.Username, cr.Password)
	fmt.Fprintf(w, "The password is shown this once; sless keeps only its hash. Publish under %s/, subscribe under %s/.\n",
		devices.EventsTopic(ns, name), devices.CommandsTopic(ns, name))
}

func runDeviceList(ctx context.Context, stdout io.Writer, getenv func(string) string, args []string) error {
	fs := newFlags("device list", deviceSynopsis)
	var c common
	c.register(fs, true)
	if err := noPositionals(fs, args, "sless device describe NAME shows one device"); err != nil {
		return err
	}
	s, err := c.connect(ctx, getenv)
	if err != nil {
		return err
	}
	all, err := s.api.AllDevices(ctx, s.ns)
	if err != nil {
		return err
	}
	return printers.Devices(stdout, c.output, s.ns, all)
}

// runDeviceOne runs the subcommands that take one device's name.
func runDeviceOne(ctx context.Context, stdout io.Writer, getenv func(string) string, sub string, args []string) error {
	fs := newFlags("device "+sub, deviceSynopsis)
	var c common
	c.register(fs, sub == "describe" || sub == "get")
	name, err := onePositionalOf(fs, args, "device")
	if err != nil {
		return err
	}
	s, err := c.connect(ctx, getenv)
	if err != nil {
		return err
	}
	switch sub {
	case "describe", "get":
		d, err := s.api.GetDevice(ctx, s.ns, name)
		if err != nil {
			return err
		}
		return printers.Device(stdout, c.output, d)
	case "rotate":
		cr, err := s.api.RotateDevice(ctx, s.ns, name)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "device %s has a new password; its connections made with the old one are closed\n", name)
		printCredentials(stdout, cr)
		return nil
	case "disable", "enable":
		on := sub == "enable"
		if _, err := s.api.PatchDevice(ctx, s.ns, name, map[string]any{"spec": map[string]any{"enabled": on}}); err != nil {
			return err
		}
		if on {
			fmt.Fprintf(stdout, "device %s enabled: it may connect again\n", name)
		} else {
			fmt.Fprintf(stdout, "device %s disabled: its connections are refused and the live one is closed\n", name)
		}
		return nil
	case "delete":
		if err := s.api.DeleteDevice(ctx, s.ns, name); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "device %s deleted\n", name)
		return nil
	}
	return errors.New("unreachable")
}
