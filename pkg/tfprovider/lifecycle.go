package tfprovider

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sless-dev/sless/pkg/client"
)

// The steps of planning, creating, reading and deleting that every
// resource takes alike; each resource calls them with its own model and
// client methods.

// getFunc is a client's get for one kind as a method expression, such as
// (*client.Client).GetJob: Read names it while there may be no client.
type getFunc[T any] func(c *client.Client, ctx context.Context, ns, name string) (T, error)

// modelGetter is a request's plan, state or configuration.
type modelGetter interface {
	Get(ctx context.Context, target any) diag.Diagnostics
}

// applyModel reads into m the model a Create (from the plan) or a Delete
// (from the state) acts on; false, reported in diags, when there is none
// or no client to act with.
func applyModel(ctx context.Context, d *apiData, from modelGetter, m any, diags *diag.Diagnostics) bool {
	if !requireAPI(d, diags) {
		return false
	}
	diags.Append(from.Get(ctx, m)...)
	return !diags.HasError()
}

// planNewObject plans a new object's namespace, and its ID once namespace
// and name are known; false when the namespace could not be had.
func planNewObject(ctx context.Context, d *apiData, configured, name types.String, ns, id *types.String, diags *diag.Diagnostics) bool {
	planned, err := planNamespace(ctx, d, configured)
	if err != nil {
		addNamespaceError(diags, err)
		return false
	}
	*ns = planned
	if planned.IsUnknown() || name.IsUnknown() {
		*id = types.StringUnknown()
	} else {
		*id = types.StringValue(planned.ValueString() + "/" + name.ValueString())
	}
	return true
}

// nameTaken says whether a create failed because a live object holds the
// name. One being deleted does not count: the API's error says it is.
func nameTaken[T interface{ GetDeletionTimestamp() *metav1.Time }](ctx context.Context, c *client.Client, get getFunc[T], ns, name string, err error) bool {
	if !client.IsConflict(err) {
		return false
	}
	existing, gerr := get(c, ctx, ns, name)
	return gerr == nil && existing.GetDeletionTimestamp() == nil
}

// addExistsError reports a create refused because the object exists, with
// the import that brings it under Terraform.
func addExistsError(diags *diag.Diagnostics, kind, ns, name string) {
	diags.AddError(strings.ToUpper(kind[:1])+kind[1:]+" already exists",
		fmt.Sprintf("%s %s/%s already exists; bring it under Terraform with: terraform import <address> %s/%s", kind, ns, name, ns, name))
}

// readObject gets the object a prior state names, for Read; false when
// Read has nothing to refresh the state from. Without a client the state
// stays as it was, with a warning; an object deleted outside Terraform is
// removed from the state, so the next plan creates it again.
func readObject[T any](ctx context.Context, d *apiData, kind string, id, ns, name types.String, get getFunc[T], resp *resource.ReadResponse) (T, bool) {
	var none T
	if d == nil {
		unrefreshed(&resp.Diagnostics, kind, id)
		return none, false
	}
	got, err := get(d.client, ctx, ns.ValueString(), name.ValueString())
	if client.IsNotFound(err) {
		resp.State.RemoveResource(ctx)
		return none, false
	}
	if err != nil {
		resp.Diagnostics.AddError("Reading the "+kind+" failed", err.Error())
		return none, false
	}
	return got, true
}

// deleteObject deletes the object a state names and waits until the API no
// longer has it: a finalizer may hold it for a while.
func deleteObject[T any](ctx context.Context, c *client.Client, kind string, ns, name types.String, timeout time.Duration,
	del func(c *client.Client, ctx context.Context, ns, name string) error, get getFunc[T], diags *diag.Diagnostics) {
	if err := waitGone(ctx, c, kind, ns.ValueString(), name.ValueString(), timeout, del, get); err != nil {
		diags.AddError("Deleting the "+kind+" failed", err.Error())
	}
}

// waitGone deletes an object and polls until the API no longer has it.
func waitGone[T any](ctx context.Context, c *client.Client, kind, ns, name string, timeout time.Duration,
	del func(c *client.Client, ctx context.Context, ns, name string) error, get getFunc[T]) error {
	progress(ctx, kind, ns, name, "deleting")
	if err := del(c, ctx, ns, name); err != nil && !client.IsNotFound(err) {
		return err
	}
	p := newPoller(timeout)
	for {
		_, err := get(c, ctx, ns, name)
		if client.IsNotFound(err) {
			progress(ctx, kind, ns, name, "deleted")
			return nil
		}
		if err != nil {
			return err
		}
		if werr := p.wait(ctx); werr != nil {
			if errors.Is(werr, errTimeout) {
				return fmt.Errorf("%s %s/%s still exists %s after it was deleted", kind, ns, name, timeout)
			}
			return werr
		}
	}
}
