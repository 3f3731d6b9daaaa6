package tfprovider

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	k8svalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/sless-dev/sless/pkg/client"
)

// The attribute validators below give the quick, per-attribute answers
// (Terraform shows them next to the attribute). The authoritative check is
// the resource's ValidateConfig, which runs the API's own validation
// function over the configuration and names the attribute of each error.
// Where both would refuse the same attribute, the attribute's validator
// speaks alone (skippedAttributes): one mistake, one error, with the value
// as the user wrote it.

// attrError reports a refused attribute. The path leads the detail, as in
// fieldMapper.addFieldErrors: for a nested attribute the CLI can only point
// at the enclosing block.
func attrError(diags *diag.Diagnostics, p path.Path, summary, detail string) {
	diags.AddAttributeError(p, summary, p.String()+": "+detail)
}

// resourceAttributes is r's schema's attributes.
func resourceAttributes(ctx context.Context, r resource.Resource) map[string]schema.Attribute {
	var resp resource.SchemaResponse
	r.Schema(ctx, resource.SchemaRequest{}, &resp)
	return resp.Schema.Attributes
}

// skippedAttributes returns the attributes whose errors from the API's
// validation ValidateConfig leaves out: those whose own validators refuse
// the configured value (they report it, with the value as written), and
// those not known yet (the spec built for the shared validation holds
// nothing for them, which it would call missing; they are judged when they
// are known, at apply at the latest). It walks attrs and the single nested
// attributes in them.
func skippedAttributes(ctx context.Context, attrs map[string]schema.Attribute, cfg tfsdk.Config) map[string]bool {
	skip := map[string]bool{}
	var walk func(attrs map[string]schema.Attribute, parent path.Path)
	walk = func(attrs map[string]schema.Attribute, parent path.Path) {
		for name, a := range attrs {
			p := parent.AtName(name)
			var diags diag.Diagnostics
			unknown := false
			switch a := a.(type) {
			case schema.StringAttribute:
				var v types.String
				if cfg.GetAttribute(ctx, p, &v).HasError() {
					continue
				}
				unknown = v.IsUnknown()
				for _, val := range a.Validators {
					var resp validator.StringResponse
					val.ValidateString(ctx, validator.StringRequest{Path: p, PathExpression: p.Expression(), Config: cfg, ConfigValue: v}, &resp)
					diags.Append(resp.Diagnostics...)
				}
			case schema.Int64Attribute:
				var v types.Int64
				if cfg.GetAttribute(ctx, p, &v).HasError() {
					continue
				}
				unknown = v.IsUnknown()
				for _, val := range a.Validators {
					var resp validator.Int64Response
					val.ValidateInt64(ctx, validator.Int64Request{Path: p, PathExpression: p.Expression(), Config: cfg, ConfigValue: v}, &resp)
					diags.Append(resp.Diagnostics...)
				}
			case schema.BoolAttribute:
				var v types.Bool
				if cfg.GetAttribute(ctx, p, &v).HasError() {
					continue
				}
				unknown = v.IsUnknown()
			case schema.MapAttribute, schema.MapNestedAttribute:
				var v types.Map
				if cfg.GetAttribute(ctx, p, &v).HasError() {
					continue
				}
				unknown = v.IsUnknown()
			case schema.SingleNestedAttribute:
				var v types.Object
				if cfg.GetAttribute(ctx, p, &v).HasError() {
					continue
				}
				if unknown = v.IsUnknown(); !unknown {
					walk(a.Attributes, p)
				}
			}
			if unknown || diags.HasError() {
				skip[p.String()] = true
			}
		}
	}
	walk(attrs, path.Empty())
	return skip
}

var dnsLabelRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

type dnsLabel struct{ max int }

func (v dnsLabel) Description(context.Context) string {
	return fmt.Sprintf("a DNS label of at most %d characters", v.max)
}
func (v dnsLabel) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }
func (v dnsLabel) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	s := req.ConfigValue.ValueString()
	if !dnsLabelRE.MatchString(s) || len(s) > v.max {
		attrError(&resp.Diagnostics, req.Path, "Invalid value",
			fmt.Sprintf("%q must be %s: lower-case letters, digits and '-', starting and ending with a letter or digit", s, v.Description(context.Background())))
	}
}

type oneOf []string

func (v oneOf) Description(context.Context) string {
	return "one of " + strings.Join(v, ", ")
}
func (v oneOf) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }
func (v oneOf) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	s := req.ConfigValue.ValueString()
	for _, ok := range v {
		if s == ok {
			return
		}
	}
	attrError(&resp.Diagnostics, req.Path, "Unsupported value",
		fmt.Sprintf("%q is not supported: must be %s", s, v.Description(context.Background())))
}

type between struct{ lo, hi int64 }

func (v between) Description(context.Context) string {
	return fmt.Sprintf("between %d and %d", v.lo, v.hi)
}
func (v between) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }
func (v between) ValidateInt64(_ context.Context, req validator.Int64Request, resp *validator.Int64Response) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if n := req.ConfigValue.ValueInt64(); n < v.lo || n > v.hi {
		attrError(&resp.Diagnostics, req.Path, "Value out of range",
			fmt.Sprintf("%d is out of range: must be %s", n, v.Description(context.Background())))
	}
}

// notEmpty refuses "". For an optional attribute the way to say "none" is
// to leave it out, and the message says so; a required one just needs a value.
type notEmpty struct{ required bool }

func (notEmpty) Description(context.Context) string               { return "not empty" }
func (v notEmpty) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }
func (v notEmpty) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if !req.ConfigValue.IsNull() && !req.ConfigValue.IsUnknown() && req.ConfigValue.ValueString() == "" {
		detail := "must not be empty; leave the attribute out instead of setting \"\""
		if v.required {
			detail = "must not be empty"
		}
		attrError(&resp.Diagnostics, req.Path, "Empty value", detail)
	}
}

// objectName checks the name of a Kubernetes object such as a Secret: a
// DNS-1123 subdomain (dots allowed), as the apiserver requires.
type objectName struct{}

func (objectName) Description(context.Context) string {
	return "a DNS-1123 subdomain of at most 253 characters"
}
func (v objectName) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }
func (v objectName) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if msgs := k8svalidation.IsDNS1123Subdomain(req.ConfigValue.ValueString()); len(msgs) > 0 {
		attrError(&resp.Diagnostics, req.Path, "Invalid value",
			fmt.Sprintf("%q must be %s: %s", req.ConfigValue.ValueString(), v.Description(context.Background()), strings.Join(msgs, "; ")))
	}
}

type durationString struct{}

func (durationString) Description(context.Context) string {
	return `a positive duration such as "90s" or "10m"`
}
func (v durationString) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }
func (v durationString) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if d, err := time.ParseDuration(req.ConfigValue.ValueString()); err != nil || d <= 0 {
		attrError(&resp.Diagnostics, req.Path, "Invalid duration",
			fmt.Sprintf("%q must be %s", req.ConfigValue.ValueString(), v.Description(context.Background())))
	}
}

type jsonString struct{}

func (jsonString) Description(context.Context) string               { return "a JSON document" }
func (v jsonString) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }
func (jsonString) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if !json.Valid([]byte(req.ConfigValue.ValueString())) {
		attrError(&resp.Diagnostics, req.Path, "Invalid JSON",
			"must be a JSON document; build it with jsonencode(...)")
	}
}

type quantity struct{}

func (quantity) Description(context.Context) string {
	return `a positive CPU quantity such as "250m" or "1"`
}
func (v quantity) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }
func (v quantity) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	q, err := apiresource.ParseQuantity(req.ConfigValue.ValueString())
	if err != nil || q.Sign() <= 0 {
		attrError(&resp.Diagnostics, req.Path, "Invalid CPU quantity",
			fmt.Sprintf("%q must be %s", req.ConfigValue.ValueString(), v.Description(context.Background())))
	}
}

// fieldMapper turns an API field path ("spec.memoryMB", "spec.env[3].name")
// into the attribute it came from.
type fieldMapper struct {
	// exact and prefix map API paths to attribute paths; the longest
	// matching prefix wins.
	prefixes map[string]path.Path
	// env is the attribute of each spec.env index, in the order sent.
	env []path.Path
}

var envIndexRE = regexp.MustCompile(`^spec\.env\[(\d+)\]`)

// trafficIndexRE finds an entry's field in an API field path.
var trafficIndexRE = regexp.MustCompile(`^spec\.traffic\[(\d+)\](?:\.(\w+))?`)

// trafficAttr names the attribute of a field of spec.traffic's entries.
func trafficAttr(apiField string) (path.Path, bool) {
	sub := trafficIndexRE.FindStringSubmatch(apiField)
	if sub == nil {
		return path.Empty(), false
	}
	i, err := strconv.Atoi(sub[1])
	if err != nil {
		return path.Empty(), false
	}
	p := path.Root("traffic").AtListIndex(i)
	if name, ok := map[string]string{"revisionName": "revision", "latestRevision": "latest", "percent": "percent", "tag": "tag"}[sub[2]]; ok {
		return p.AtName(name), true
	}
	return p, true
}

func (m fieldMapper) attr(apiField string) (path.Path, bool) {
	if sub := envIndexRE.FindStringSubmatch(apiField); sub != nil {
		if i, err := strconv.Atoi(sub[1]); err == nil && i < len(m.env) {
			return m.env[i], true
		}
	}
	if p, ok := trafficAttr(apiField); ok {
		return p, true
	}
	best, bestLen := path.Empty(), -1
	for prefix, p := range m.prefixes {
		if (apiField == prefix || strings.HasPrefix(apiField, prefix+".") || strings.HasPrefix(apiField, prefix+"[")) && len(prefix) > bestLen {
			best, bestLen = p, len(prefix)
		}
	}
	return best, bestLen >= 0
}

// addFieldErrors reports the API validation function's errors on the
// attributes they concern, except on the attributes in skip and inside them
// (see skippedAttributes).
func (m fieldMapper) addFieldErrors(diags *diag.Diagnostics, errs field.ErrorList, skip map[string]bool) {
	skipped := func(p path.Path) bool {
		for ; len(p.Steps()) > 0; p = p.ParentPath() {
			if skip[p.String()] {
				return true
			}
		}
		return false
	}
	for _, e := range errs {
		if p, ok := m.attr(e.Field); ok {
			if skipped(p) {
				continue
			}
			// The path leads the detail: for a nested attribute the CLI can
			// only point at the enclosing block.
			diags.AddAttributeError(p, "Invalid configuration", p.String()+": "+e.ErrorBody())
		} else {
			diags.AddError("Invalid configuration", e.Error())
		}
	}
}

// addAPIError reports an error from the API, on the attributes its field
// errors name when it has any.
func (m fieldMapper) addAPIError(diags *diag.Diagnostics, summary string, err error) {
	var apiErr *client.Error
	if asAPIError(err, &apiErr) && len(apiErr.Fields) > 0 {
		for _, f := range apiErr.Fields {
			if p, ok := m.attr(f.Field); ok {
				diags.AddAttributeError(p, summary, f.Detail+" (the API refused "+f.Field+")")
				continue
			}
			diags.AddError(summary, f.Field+": "+f.Detail)
		}
		return
	}
	diags.AddError(summary, err.Error())
}
