package tfprovider

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sync/atomic"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/sless-dev/sless/pkg/client"
)

// A provider configured wrongly fails the plan with a diagnostic that says
// what to fix, on the setting at fault, against the real API: never a
// panic, never a bare 401 on whichever resource asked first.
func TestAccProviderConfigurationErrors(t *testing.T) {
	api := startAPI(t)
	body := `resource "sless_trigger" "t" {
  name     = "cfg"
  function = "cfg"
  type     = "http"
}

data "sless_functions" "all" {}
`
	for _, tc := range []struct {
		name     string
		provider string
		want     string
	}{
		{"token the API refuses", fmt.Sprintf("  endpoint = %q\n  token = \"not-the-token-0123456789\"", api.Endpoint),
			`(?s)The sless API refused the token.*401 Unauthorized.*SLESS_TOKEN`},
		{"token with space inside", fmt.Sprintf("  endpoint = %q\n  token = \"two words\"", api.Endpoint),
			`(?s)Invalid sless token.*white space or control characters inside`},
		{"endpoint without a scheme", "  endpoint = \"127.0.0.1:8080\"\n  token = \"x\"",
			`(?s)Invalid sless endpoint.*127\.0\.0\.1:8080`},
		{"endpoint with another scheme", "  endpoint = \"ftp://127.0.0.1:8080\"\n  token = \"x\"",
			`(?s)Invalid sless endpoint.*scheme must be http or https`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The environment names the working API: the provider block
			// must win over it.
			resource.Test(t, resource.TestCase{
				ProtoV6ProviderFactories: providerFactories(),
				Steps: []resource.TestStep{{
					Config:      hcl(tc.provider, body),
					PlanOnly:    true,
					ExpectError: regexp.MustCompile(tc.want),
				}},
			})
		})
	}
	t.Run("token read from a file", func(t *testing.T) {
		// token = file("dev-token") ends in a newline; it is the token all
		// the same (it used to fail every call, after two minutes of
		// retries, on an invalid header).
		resource.Test(t, resource.TestCase{
			ProtoV6ProviderFactories: providerFactories(),
			Steps: []resource.TestStep{{
				Config: hcl(fmt.Sprintf("  endpoint = %q\n  token = %q", api.Endpoint, api.Token+"\n"), `data "sless_functions" "all" {}
`),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("data.sless_functions.all", tfjsonpath.New("namespace"), knownvalue.StringExact(api.Namespace)),
				},
			}},
		})
	})
	t.Run("no token anywhere", func(t *testing.T) {
		t.Setenv(EnvToken, "")
		resource.Test(t, resource.TestCase{
			ProtoV6ProviderFactories: providerFactories(),
			Steps: []resource.TestStep{{
				Config:      hcl(fmt.Sprintf("  endpoint = %q", api.Endpoint), body),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`(?s)Missing sless token.*token in the provider block or the SLESS_TOKEN`),
			}},
		})
	})
	t.Run("no endpoint anywhere", func(t *testing.T) {
		t.Setenv(EnvEndpoint, "")
		resource.Test(t, resource.TestCase{
			ProtoV6ProviderFactories: providerFactories(),
			Steps: []resource.TestStep{{
				Config:      hcl("", body),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`(?s)Missing sless endpoint.*SLESS_ENDPOINT`),
			}},
		})
	})
}

// The token's namespace is asked for once per provider, failure included:
// an endpoint that does not answer costs the client's whole retry budget,
// which a plan must not pay again for every resource that names no namespace.
func TestDefaultNamespaceAsksOnce(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   string
		wantNS string
	}{
		{"found", http.StatusOK, `{"subject":"dev","namespace":"team-a"}`, "team-a"},
		{"refused", http.StatusUnauthorized, `{"title":"Unauthorized","status":401,"detail":"bad token"}`, ""},
		{"no namespace", http.StatusOK, `{"subject":"dev"}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				if r.URL.Path != "/v1/whoami" {
					http.NotFound(w, r)
					return
				}
				if tc.status != http.StatusOK {
					w.Header().Set("Content-Type", "application/problem+json")
				} else {
					w.Header().Set("Content-Type", "application/json")
				}
				w.WriteHeader(tc.status)
				fmt.Fprint(w, tc.body)
			}))
			defer srv.Close()
			c, err := client.New(srv.URL, "token")
			if err != nil {
				t.Fatal(err)
			}
			d := &apiData{client: c}
			for i := range 3 {
				ns, err := d.defaultNamespace(context.Background())
				if ns != tc.wantNS || (err != nil) != (tc.wantNS == "") {
					t.Fatalf("call %d: %q, %v; want namespace %q", i, ns, err, tc.wantNS)
				}
			}
			if n := calls.Load(); n != 1 {
				t.Errorf("whoami asked %d times, want once", n)
			}
		})
	}
}
