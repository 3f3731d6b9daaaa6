package tfprovider

import (
	"fmt"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
)

// Bad configuration fails at plan, with the attribute named, before the
// provider talks to any API: the endpoint here has nothing listening.
func TestAccBadConfigurationFailsAtPlan(t *testing.T) {
	accCLI(t)
	src := writeTree(t, helloPy)
	provider := `  endpoint  = "http://127.0.0.1:9"
  token     = "unused"
  namespace = "acc"`
	fn := func(attrs string) string {
		return hcl(provider, fmt.Sprintf(`resource "sless_function" "bad" {
  name       = "bad"
  runtime    = "python3.12"
  entrypoint = "main.handler"
%s
}
`, attrs))
	}
	withDir := fmt.Sprintf("  source_dir = %q\n", src)
	for _, tc := range []struct {
		name   string
		config string
		// want must match the CLI's error output: the message and the
		// attribute (the configuration line, or the path in the message).
		attr, message string
	}{
		{"negative memory", fn(withDir + "  memory_mb = -10"), `memory_mb\s*= -10`, `out of range`},
		{"memory too large", fn(withDir + "  memory_mb = 9000"), `memory_mb\s*= 9000`, `between 64 and 4096`},
		{"unknown runtime", hcl(provider, fmt.Sprintf(`resource "sless_function" "bad" {
  name       = "bad"
  runtime    = "cobol85"
  entrypoint = "main.handler"
  source_dir = %q
}
`, src)), `runtime\s*= "cobol85"`, `"cobol85" is not supported`},
		{"two sources", fn(withDir + `  image = "ghcr.io/acme/app:1"`), `(source_dir|image)\s*=`, `Conflicting sources`},
		{"no source", fn(""), `Missing source`, `exactly one of source_dir, source_zip and image must be set`},
		{"missing directory", fn(`  source_dir = "/nonexistent/sless"`), `source_dir\s*= "/nonexistent/sless"`, `no such file`},
		{"entrypoint not in the code", hcl(provider, fmt.Sprintf(`resource "sless_function" "bad" {
  name       = "bad"
  runtime    = "python3.12"
  entrypoint = "app.handler"
  source_dir = %q
}
`, src)), `entrypoint\s*= "app.handler"`, `Entrypoint not found in the source`},
		{"reserved env name", fn(withDir + `  env = { SLESS_SECRET = "x" }`), `env\["SLESS_SECRET"\]`, `reserved`},
		{"scale max below min", fn(withDir + `  scale = { min = 3, max = 1 }`), `scale\.max`, `max.* must be greater than or equal to min`},
		{"async retries above 10", fn(withDir + `  async = { max_retries = 11 }`), `async\.max_retries`, `between 0 and 10`},
		{"memory in both places", fn(withDir + "  memory_mb = 256\n  resources = { limits = { memory = \"512Mi\" } }"), `memory_mb`, `memoryMB and resources' memory are one\s+setting`},
		{"a quantity that is not one", fn(withDir + `  resources = { limits = { memory = "2GB" } }`), `resources\.limits\["memory"\]`, `Invalid quantity`},
		{"a request over its limit", fn(withDir + `  resources = { requests = { cpu = "2" }, limits = { cpu = "1" } }`), `resources\.requests`, `a request must not exceed its limit`},
		{"a GPU request", fn(withDir + `  resources = { requests = { "nvidia.com/gpu" = "1" } }`), `resources\.requests`, `extended resources are set in limits`},
		{"a bad node selector value", fn(withDir + `  node_selector = { disktype = "not valid" }`), `node_selector`, `nodeSelector values must be label\s+values`},
		{"a toleration operator", fn(withDir + `  tolerations = [{ key = "a", operator = "Maybe" }]`), `tolerations`, `operator is Exists or\s+Equal`},
		{"node affinity not JSON", fn(withDir + `  node_affinity_json = "{"`), `node_affinity_json`, `JSON`},
		{"empty string for an optional attribute", fn(withDir + `  cpu = ""`), `cpu\s*= ""`, `Invalid CPU quantity`},
		{"bad wait timeout", fn(withDir + `  wait_timeout = "soon"`), `wait_timeout`, `Invalid duration`},
		{"bad name", hcl(provider, fmt.Sprintf(`resource "sless_function" "bad" {
  name       = "Not_A_Label"
  runtime    = "python3.12"
  entrypoint = "main.handler"
  source_dir = %q
}
`, src)), `name\s*= "Not_A_Label"`, `DNS label`},
		{"cron trigger without schedule", hcl(provider, `resource "sless_trigger" "bad" {
  name     = "bad"
  function = "hello"
  type     = "cron"
}
`), `schedule`, `schedule is required for cron triggers`},
		{"bad cron schedule", hcl(provider, `resource "sless_trigger" "bad" {
  name     = "bad"
  function = "hello"
  type     = "cron"
  schedule = "61 * * * *"
}
`), `schedule\s*= "61 \* \* \* \*"`, `Invalid configuration`},
		{"schedule on an http trigger", hcl(provider, `resource "sless_trigger" "bad" {
  name     = "bad"
  function = "hello"
  type     = "http"
  schedule = "@hourly"
}
`), `schedule\s*= "@hourly"`, `applies only to cron triggers`},
		{"unknown time zone", hcl(provider, `resource "sless_trigger" "bad" {
  name      = "bad"
  function  = "hello"
  type      = "cron"
  schedule  = "@hourly"
  time_zone = "Mars/Olympus"
}
`), `time_zone\s*= "Mars/Olympus"`, `unknown time zone`},
		{"job payload not JSON", hcl(provider, `resource "sless_job" "bad" {
  name     = "bad"
  function = "hello"
  payload  = "{not json"
}
`), `payload`, `Invalid JSON`},
		{"negative run id", hcl(provider, `resource "sless_job" "bad" {
  name     = "bad"
  function = "hello"
  run_id   = -1
}
`), `run_id\s*= -1`, `out of range`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resource.Test(t, resource.TestCase{
				ProtoV6ProviderFactories: providerFactories(),
				Steps: []resource.TestStep{{
					Config:      tc.config,
					PlanOnly:    true,
					ExpectError: regexp.MustCompile(fmt.Sprintf(`(?s)(%s.*%s|%s.*%s)`, tc.attr, tc.message, tc.message, tc.attr)),
				}},
			})
		})
	}
}

// A plan of a new function knows what can be known before apply: the id,
// the namespace and the source's sha256 (computed from the directory by the
// provider); what the server decides is unknown. Nothing here calls the API.
func TestAccPlanKnowsSourceDigest(t *testing.T) {
	accCLI(t)
	src := writeTree(t, helloPy)
	a, err := zipDir(src)
	if err != nil {
		t.Fatal(err)
	}
	zipPath := filepath.Join(t.TempDir(), "code.zip")
	writeFile(t, zipPath, a.Zip)
	config := hcl(`  endpoint  = "http://127.0.0.1:9"
  token     = "unused"
  namespace = "acc"`, fmt.Sprintf(`resource "sless_function" "dir" {
  name       = "from-dir"
  runtime    = "python3.12"
  entrypoint = "main.handler"
  source_dir = %q
}

resource "sless_function" "zip" {
  name       = "from-zip"
  runtime    = "python3.12"
  entrypoint = "main.handler"
  source_zip = %q
}
`, src, zipPath))
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories(),
		Steps: []resource.TestStep{{
			Config:             config,
			PlanOnly:           true,
			ExpectNonEmptyPlan: true,
			ConfigPlanChecks: resource.ConfigPlanChecks{PostApplyPreRefresh: []plancheck.PlanCheck{
				plancheck.ExpectResourceAction("sless_function.dir", plancheck.ResourceActionCreate),
				plancheck.ExpectKnownValue("sless_function.dir", tfjsonpath.New("source_sha256"), knownvalue.StringExact(a.SHA256)),
				plancheck.ExpectKnownValue("sless_function.zip", tfjsonpath.New("source_sha256"), knownvalue.StringExact(a.SHA256)),
				plancheck.ExpectKnownValue("sless_function.dir", tfjsonpath.New("id"), knownvalue.StringExact("acc/from-dir")),
				plancheck.ExpectKnownValue("sless_function.dir", tfjsonpath.New("memory_mb"), knownvalue.Null()),
				// A create that stops waiting at wait_timeout leaves the phase it saw.
				plancheck.ExpectUnknownValue("sless_function.dir", tfjsonpath.New("phase")),
				plancheck.ExpectKnownValue("sless_function.dir", tfjsonpath.New("image"), knownvalue.Null()),
				plancheck.ExpectKnownValue("sless_function.dir", tfjsonpath.New("cpu"), knownvalue.Null()),
				plancheck.ExpectUnknownValue("sless_function.dir", tfjsonpath.New("url")),
				plancheck.ExpectUnknownValue("sless_function.dir", tfjsonpath.New("revision")),
				plancheck.ExpectUnknownValue("sless_function.dir", tfjsonpath.New("resolved_image")),
			}},
		}},
	})
}
