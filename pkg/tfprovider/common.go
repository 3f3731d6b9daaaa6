package tfprovider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sless-dev/sless/pkg/client"
)

func asAPIError(err error, target **client.Error) bool { return errors.As(err, target) }

// unconfiguredDetail says why a provider has no client during a plan.
const unconfiguredDetail = "The provider's endpoint or token depends on values known only after apply " +
	"(attributes of other resources), so the sless API cannot be called during this plan. Give them values " +
	"known at plan (variables, or the " + EnvEndpoint + " and " + EnvToken + " environment variables), or apply " +
	"the resources they come from first (terraform apply -target=...)."

// requireAPI reports, and says false, when the provider has no client to
// call the API with.
func requireAPI(d *apiData, diags *diag.Diagnostics) bool {
	if d != nil {
		return true
	}
	diags.AddError("The sless provider is not configured", unconfiguredDetail)
	return false
}

// unrefreshed is what a resource's Read does without a client: the state
// stays as it was (Terraform refreshes it on a later run) and a warning
// says so.
func unrefreshed(diags *diag.Diagnostics, kind string, id types.String) {
	diags.AddWarning("Not refreshed", fmt.Sprintf("%s %s keeps its last known state. %s", kind, id.ValueString(), unconfiguredDetail))
}

// configureResource takes the provider's data in a resource's Configure.
func configureResource(providerData any, diags *diag.Diagnostics) *apiData {
	if providerData == nil {
		// Validation runs before the provider is configured.
		return nil
	}
	d, ok := providerData.(*apiData)
	if !ok {
		diags.AddError("Unexpected provider data", fmt.Sprintf("got %T, want *apiData; this is a bug in the provider", providerData))
		return nil
	}
	return d
}

// importID splits "namespace/name" for terraform import; a bare name gives
// ns "" (the provider's namespace).
func importID(id string) (ns, name string, err error) {
	parts := strings.Split(id, "/")
	switch {
	case len(parts) == 2 && parts[0] != "" && parts[1] != "":
		return parts[0], parts[1], nil
	case len(parts) == 1 && parts[0] != "":
		return "", parts[0], nil
	}
	return "", "", fmt.Errorf("import ID %q must be namespace/name (or a name in the provider's namespace)", id)
}

func importInto(ctx context.Context, d *apiData, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	ns, name, err := importID(req.ID)
	if err != nil {
		resp.Diagnostics.AddError("Invalid import ID", err.Error())
		return
	}
	if ns == "" {
		if d == nil {
			resp.Diagnostics.AddError("Provider not configured", "the provider is not configured; this is a bug in the provider")
			return
		}
		if ns, err = d.defaultNamespace(ctx); err != nil {
			addNamespaceError(&resp.Diagnostics, err)
			return
		}
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), ns+"/"+name)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("namespace"), ns)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), name)...)
}

// planNamespace is the namespace a new object goes to: the configured one,
// else the provider's default (unknown while the provider's settings are).
func planNamespace(ctx context.Context, d *apiData, configured types.String) (types.String, error) {
	if !configured.IsNull() {
		return configured, nil
	}
	if d == nil || d.namespaceUnknown {
		return types.StringUnknown(), nil
	}
	ns, err := d.defaultNamespace(ctx)
	if err != nil {
		return types.StringUnknown(), err
	}
	return types.StringValue(ns), nil
}

// planExistingNamespace plans the namespace of an object that exists and
// whose configuration names none: the provider's, as for a new object.
// Removing namespace from a configuration so moves the object to the
// provider's namespace, a replacement, rather than leaving it where it was
// with no change planned. It says whether it replaces the object. While the
// provider's namespace is not known the object stays where it is.
func planExistingNamespace(ctx context.Context, d *apiData, configured types.String, planned *types.String, resp *resource.ModifyPlanResponse) bool {
	if !configured.IsNull() {
		// The configured one; changing it replaces the object by the
		// attribute's plan modifier.
		return false
	}
	ns, err := planNamespace(ctx, d, configured)
	if err != nil {
		addNamespaceError(&resp.Diagnostics, err)
		return false
	}
	if ns.IsUnknown() || ns.Equal(*planned) {
		return false
	}
	*planned = ns
	resp.RequiresReplace = append(resp.RequiresReplace, path.Root("namespace"))
	return true
}

// waitTimeout is the resource's wait_timeout, or def.
func waitTimeout(v types.String, def time.Duration) time.Duration {
	if v.IsNull() || v.IsUnknown() {
		return def
	}
	d, err := time.ParseDuration(v.ValueString())
	if err != nil || d <= 0 {
		return def
	}
	return d
}

// poller polls with a growing interval until a deadline.
type poller struct {
	deadline time.Time
	interval time.Duration
}

func newPoller(timeout time.Duration) *poller {
	return &poller{deadline: time.Now().Add(timeout), interval: 300 * time.Millisecond}
}

// wait sleeps before the next poll; it fails when the deadline has passed or
// the context ended.
func (p *poller) wait(ctx context.Context) error {
	if time.Now().After(p.deadline) {
		return errTimeout
	}
	t := time.NewTimer(min(p.interval, time.Until(p.deadline)+time.Millisecond))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
	}
	p.interval = min(p.interval*3/2, 3*time.Second)
	return nil
}

var errTimeout = errors.New("timed out")

// progress logs one line of an apply's progress, visible with TF_LOG=INFO.
func progress(ctx context.Context, kind, ns, name, msg string, kv ...any) {
	fields := map[string]any{"namespace": ns, "name": name}
	for i := 0; i+1 < len(kv); i += 2 {
		fields[fmt.Sprint(kv[i])] = kv[i+1]
	}
	tflog.Info(ctx, fmt.Sprintf("%s %s/%s: %s", kind, ns, name, msg), fields)
}

// condition finds a condition by type.
func condition(conds []metav1.Condition, t string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

// jsonValue turns an attribute holding JSON into the API's payload.
func jsonValue(v types.String) *apiextensionsv1.JSON {
	if v.IsNull() || v.IsUnknown() {
		return nil
	}
	return &apiextensionsv1.JSON{Raw: []byte(v.ValueString())}
}

// jsonState is the state of a JSON attribute given what the API holds: the
// prior string when it means the same document (the user's formatting
// stays), else the API's compact form.
func jsonState(prior types.String, got *apiextensionsv1.JSON) types.String {
	if got == nil || len(got.Raw) == 0 || string(got.Raw) == "null" {
		return types.StringNull()
	}
	if !prior.IsNull() && !prior.IsUnknown() && sameJSON([]byte(prior.ValueString()), got.Raw) {
		return prior
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, got.Raw); err != nil {
		return types.StringValue(string(got.Raw))
	}
	return types.StringValue(buf.String())
}

func sameJSON(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xb, yb)
}

// optString is a string attribute's state: null for "".
func optString(s string) types.String {
	if s == "" {
		return types.StringNull()
	}
	return types.StringValue(s)
}

func optInt32(p *int32) types.Int64 {
	if p == nil {
		return types.Int64Null()
	}
	return types.Int64Value(int64(*p))
}

func optInt64(p *int64) types.Int64 {
	if p == nil {
		return types.Int64Null()
	}
	return types.Int64Value(*p)
}

// int32Ptr converts a known attribute; out of int32 range it is clamped so
// the validation that follows reports the attribute's bounds.
func int32Ptr(v types.Int64) *int32 {
	if v.IsNull() || v.IsUnknown() {
		return nil
	}
	n := v.ValueInt64()
	n = max(min(n, 1<<31-1), -1<<31)
	i := int32(n)
	return &i
}

func int64Ptr(v types.Int64) *int64 {
	if v.IsNull() || v.IsUnknown() {
		return nil
	}
	n := v.ValueInt64()
	return &n
}

// nullable is a merge-patch value: JSON null for an absent one, so the field
// is removed on the server.
func nullable[T any](p *T) any {
	if p == nil {
		return nil
	}
	return p
}

func nullableString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// replaceSpec makes an object's spec exactly what the configuration says:
// it reads the object, sets the spec with set (labels and annotations stay
// as they are) and writes it back with PUT under the resourceVersion it
// read, reading again when another writer got in between. A PUT rather than
// a JSON merge patch because in a merge patch a null member means "remove",
// so a payload such as {"a": null} could not be written, and members the
// configuration dropped would have to be spelled out as nulls.
func replaceSpec[T any](ctx context.Context, ns, name string, get func(context.Context, string, string) (*T, error),
	set func(*T), put func(context.Context, *T) (*T, error)) (*T, error) {
	const attempts = 5
	for i := 1; ; i++ {
		cur, err := get(ctx, ns, name)
		if err != nil {
			return nil, err
		}
		set(cur)
		got, err := put(ctx, cur)
		var apiErr *client.Error
		// A 409 without Retry-After is a lost race on the resourceVersion;
		// one with it (the object is being deleted) the client has waited
		// out already.
		if err == nil || i == attempts || !asAPIError(err, &apiErr) || apiErr.Status != http.StatusConflict || apiErr.HasRetryAfter {
			return got, err
		}
	}
}

// errorsOf folds diagnostics' errors into one error.
func errorsOf(diags diag.Diagnostics) error {
	var errs []error
	for _, d := range diags.Errors() {
		errs = append(errs, fmt.Errorf("%s: %s", d.Summary(), d.Detail()))
	}
	return errors.Join(errs...)
}
