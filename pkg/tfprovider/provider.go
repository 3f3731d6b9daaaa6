// Package tfprovider is sless's Terraform provider: the sless_function,
// sless_trigger and sless_job resources and the sless_function and
// sless_functions data sources, over the REST API (pkg/client).
//
// The rules it keeps (DESIGN §10): optional attributes left unset are null,
// never ""; computed attributes are unknown in a plan only when the apply will
// change them; what the API would refuse is refused at plan with the
// attribute named, by the same validation function the API runs.
package tfprovider

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"unicode"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/sless-dev/sless/pkg/client"
)

// Environment variables that stand in for the provider's settings.
const (
	EnvEndpoint  = "SLESS_ENDPOINT"
	EnvToken     = "SLESS_TOKEN"
	EnvNamespace = "SLESS_NAMESPACE"
)

// New returns the provider factory for version (the binary's version).
func New(version string) func() provider.Provider {
	return func() provider.Provider { return &slessProvider{version: version} }
}

type slessProvider struct {
	version string
}

type providerModel struct {
	Endpoint  types.String `tfsdk:"endpoint"`
	Token     types.String `tfsdk:"token"`
	Namespace types.String `tfsdk:"namespace"`
}

// apiData is what Configure hands the resources and data sources.
type apiData struct {
	client *client.Client

	mu        sync.Mutex
	namespace string
	// namespaceUnknown is true while the provider's namespace depends on
	// values known only after apply.
	namespaceUnknown bool
	// nsErr is why the namespace could not be found. It is kept: every
	// resource that names no namespace asks, and an unreachable endpoint
	// costs the client's whole retry budget, so asking again would make a
	// plan wait that long once per dependent resource.
	nsErr error
}

// defaultNamespace is the namespace set on the provider, else the token's
// own from whoami (asked once).
func (d *apiData) defaultNamespace(ctx context.Context) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.namespaceUnknown {
		return "", errors.New("the provider's namespace depends on values known only after apply; name the namespace here, or give the provider one known at plan")
	}
	if d.namespace != "" || d.nsErr != nil {
		return d.namespace, d.nsErr
	}
	id, err := d.client.Whoami(ctx)
	switch {
	case err != nil:
		d.nsErr = fmt.Errorf("finding the token's namespace (set namespace on the provider to skip this): %w", err)
	case id.Namespace == "":
		d.nsErr = fmt.Errorf("whoami names no namespace for this token; set namespace on the provider")
	default:
		d.namespace = id.Namespace
	}
	return d.namespace, d.nsErr
}

// addNamespaceError reports why the provider's namespace is not known. A
// token the API refuses is named as such: it is what the user must fix, and
// it is the first call of a plan that meets it.
func addNamespaceError(diags *diag.Diagnostics, err error) {
	switch client.StatusOf(err) {
	case http.StatusUnauthorized, http.StatusForbidden:
		diags.AddAttributeError(path.Root("namespace"), "The sless API refused the token",
			err.Error()+"\n\nCheck token in the provider block or the "+EnvToken+" environment variable.")
	default:
		diags.AddAttributeError(path.Root("namespace"), "Cannot find the namespace", err.Error())
	}
}

func (p *slessProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "sless"
	resp.Version = p.version
}

func (p *slessProvider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "Manages functions, triggers and jobs on a sless platform through its REST API.",
		Attributes: map[string]schema.Attribute{
			"endpoint": schema.StringAttribute{
				Optional:    true,
				Description: "Base URL of the sless API, e.g. https://sless.example.com. Defaults to $" + EnvEndpoint + ".",
			},
			"token": schema.StringAttribute{
				Optional:    true,
				Sensitive:   true,
				Description: "Bearer token for the API. Defaults to $" + EnvToken + ".",
			},
			"namespace": schema.StringAttribute{
				Optional:    true,
				Description: "Namespace of resources that name none. Defaults to $" + EnvNamespace + ", else the token's own namespace (GET /v1/whoami).",
				Validators:  []validator.String{dnsLabel{max: 63}},
			},
		},
	}
}

func (p *slessProvider) Configure(ctx context.Context, req provider.ConfigureRequest, resp *provider.ConfigureResponse) {
	var m providerModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if m.Endpoint.IsUnknown() || m.Token.IsUnknown() {
		// Known only after another resource applies; Terraform configures
		// the provider again then. Until then there is no client: the
		// resources and data sources say so (requireAPI) rather than call.
		return
	}
	endpoint := stringOr(m.Endpoint, os.Getenv(EnvEndpoint))
	token := stringOr(m.Token, os.Getenv(EnvToken))
	ns := stringOr(m.Namespace, os.Getenv(EnvNamespace))
	if m.Namespace.IsUnknown() {
		// Not the environment's: the configuration names one, known later.
		// Objects already in state carry their own namespace and can still
		// be read; only new ones wait for it (planNamespace).
		ns = ""
	}
	if endpoint == "" {
		resp.Diagnostics.AddAttributeError(path.Root("endpoint"), "Missing sless endpoint",
			"Set endpoint in the provider block or the "+EnvEndpoint+" environment variable to the sless API's URL.")
		return
	}
	// A token read from a file (token = file("dev-token")) ends in a
	// newline, which no bearer token has and no HTTP header may carry: the
	// calls would fail, after the client's retries, with an error about a
	// header. Surrounding space goes; space or control characters inside
	// are an error here.
	endpoint, token = strings.TrimSpace(endpoint), strings.TrimSpace(token)
	if strings.ContainsFunc(token, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) {
		resp.Diagnostics.AddAttributeError(path.Root("token"), "Invalid sless token",
			"the token has white space or control characters inside it; a bearer token has none (check where "+
				"token or "+EnvToken+" comes from)")
		return
	}
	if token == "" {
		// Every /v1 call needs a bearer token; without one the first call
		// would fail with a 401 on some resource instead of here.
		resp.Diagnostics.AddAttributeError(path.Root("token"), "Missing sless token",
			"Set token in the provider block or the "+EnvToken+" environment variable to a bearer token for the sless API "+
				"(for sless dev: its --dev-token, or the contents of <data-dir>/dev-token).")
		return
	}
	c, err := client.New(endpoint, token, client.WithUserAgent("terraform-provider-sless/"+p.version))
	if err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("endpoint"), "Invalid sless endpoint", err.Error())
		return
	}
	data := &apiData{client: c, namespace: ns, namespaceUnknown: m.Namespace.IsUnknown()}
	resp.ResourceData = data
	resp.DataSourceData = data
}

func (p *slessProvider) Resources(context.Context) []func() resource.Resource {
	return []func() resource.Resource{newFunctionResource, newServiceResource, newTriggerResource, newJobResource, newSecretResource}
}

func (p *slessProvider) DataSources(context.Context) []func() datasource.DataSource {
	return []func() datasource.DataSource{newFunctionDataSource, newFunctionsDataSource}
}

func stringOr(v types.String, fallback string) string {
	if v.IsNull() || v.IsUnknown() {
		return fallback
	}
	return v.ValueString()
}

// ProviderAddress is the provider's source address. Terraform and OpenTofu
// find a locally built binary there through dev_overrides (docs/terraform.md).
const ProviderAddress = "registry.terraform.io/sless-dev/sless"
