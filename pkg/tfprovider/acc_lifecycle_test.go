package tfprovider

import (
	"archive/zip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/compare"
	"github.com/hashicorp/terraform-plugin-testing/config"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/sless-dev/sless/pkg/client"
)

func pyHello(greeting string) map[string]string {
	return map[string]string{"main.py": fmt.Sprintf(`import os


def handler(event, context):
    return {"greeting": %q, "env": os.environ.get("GREETING", "")}
`, greeting)}
}

// setTree replaces dir's contents with files.
func setTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	for name, content := range files {
		writeFile(t, filepath.Join(dir, name), []byte(content))
	}
}

// invoke calls a function at its URL and decodes the JSON it answers.
func invoke(url, token string) (map[string]any, error) {
	var last error
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
		req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(`{}`))
		if err != nil {
			return nil, err
		}
		// sless dev's function hosts sit under fn.localhost, which Go does
		// not resolve (curl and browsers map *.localhost to loopback): dial
		// loopback and name the host, so no lookup leaves the machine.
		if strings.HasSuffix(req.URL.Hostname(), ".localhost") {
			req.Host = req.URL.Host
			req.URL.Host = net.JoinHostPort("127.0.0.1", req.URL.Port())
		}
		// Functions without an http trigger are private: the API's token calls them.
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			last = err
			continue
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			last = fmt.Errorf("POST %s: %d %s", url, res.StatusCode, b)
			continue
		}
		var out map[string]any
		if err := json.Unmarshal(b, &out); err != nil {
			return nil, fmt.Errorf("POST %s: %s: %w", url, b, err)
		}
		return out, nil
	}
	return nil, last
}

// answers checks that the function's URL answers with the greeting and env.
func answers(api *accAPI, addr, greeting, env string) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		rs := s.RootModule().Resources[addr]
		if rs == nil {
			return fmt.Errorf("%s not in state", addr)
		}
		out, err := invoke(rs.Primary.Attributes["url"], api.Token)
		if err != nil {
			return err
		}
		if out["greeting"] != greeting || out["env"] != env {
			return fmt.Errorf("function answered %v, want greeting %q and env %q", out, greeting, env)
		}
		return nil
	}
}

func functionGone(api *accAPI, ns, name string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		_, err := api.Client.GetFunction(context.Background(), ns, name)
		if !client.IsNotFound(err) {
			return fmt.Errorf("function %s/%s after destroy: %v", ns, name, err)
		}
		return nil
	}
}

// The sless_function life: create from a directory, no change planned after
// apply, in-place memory and env updates, a code change rolling a new
// revision, import, re-creation after an out-of-band delete, and destroy.
func TestAccFunctionLifecycle(t *testing.T) {
	api := startAPI(t)
	dir := t.TempDir()
	name := "tf-fn-" + fmt.Sprint(time.Now().UnixNano()%100000)
	addr := "sless_function.hello"
	cfg := func(memory int, greetingEnv string) string {
		return hcl("", fmt.Sprintf(`resource "sless_function" "hello" {
  name         = %q
  runtime      = "python3.12"
  entrypoint   = "main.handler"
  source_dir   = %q
  memory_mb    = %d
  env          = { GREETING = %q }
  wait_timeout = "3m"
}
`, name, dir, memory, greetingEnv))
	}
	revision := statecheck.CompareValue(compare.ValuesDiffer())
	image := statecheck.CompareValue(compare.ValuesDiffer())
	sameURL := statecheck.CompareValue(compare.ValuesSame())

	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories(),
		CheckDestroy:             functionGone(api, api.Namespace, name),
		Steps: []resource.TestStep{
			{
				PreConfig: func() { setTree(t, dir, pyHello("one")) },
				Config:    cfg(128, "a"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(addr, plancheck.ResourceActionCreate),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("id"), knownvalue.StringExact(api.Namespace+"/"+name)),
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("phase"), knownvalue.StringExact("Ready")),
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("resolved_image"), knownvalue.StringRegexp(regexp.MustCompile(`@sha256:[a-f0-9]{64}$`))),
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("cpu"), knownvalue.Null()),
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("image"), knownvalue.Null()),
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("scale"), knownvalue.Null()),
					revision.AddStateValue(addr, tfjsonpath.New("revision")),
					image.AddStateValue(addr, tfjsonpath.New("resolved_image")),
					sameURL.AddStateValue(addr, tfjsonpath.New("url")),
				},
				Check: answers(api, addr, "one", "a"),
				// terraform-plugin-testing plans again after every apply and
				// fails on any change: plan-is-empty-after-apply.
			},
			{
				// Memory and env change in place: a new revision of the same image.
				Config: cfg(256, "b"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue(addr, tfjsonpath.New("url"), knownvalue.NotNull()),
					plancheck.ExpectUnknownValue(addr, tfjsonpath.New("revision")),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("memory_mb"), knownvalue.Int64Exact(256)),
					revision.AddStateValue(addr, tfjsonpath.New("revision")),
					sameURL.AddStateValue(addr, tfjsonpath.New("url")),
				},
				Check: answers(api, addr, "one", "b"),
			},
			{
				// New code: a new digest, a new build, a new revision.
				PreConfig: func() { setTree(t, dir, pyHello("two")) },
				Config:    cfg(256, "b"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate),
					plancheck.ExpectUnknownValue(addr, tfjsonpath.New("resolved_image")),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					revision.AddStateValue(addr, tfjsonpath.New("revision")),
					image.AddStateValue(addr, tfjsonpath.New("resolved_image")),
				},
				Check: answers(api, addr, "two", "b"),
			},
			{
				// Import by namespace/name gives the same state (the directory
				// and wait budget live only in configuration).
				ResourceName:            addr,
				ImportState:             true,
				ImportStateId:           api.Namespace + "/" + name,
				ImportStateVerify:       true,
				ImportStateVerifyIgnore: []string{"source_dir", "wait_timeout"},
			},
			{
				// Deleted outside Terraform: the refresh notices, the plan
				// creates it again.
				PreConfig: func() {
					if err := api.Client.DeleteFunction(context.Background(), api.Namespace, name); err != nil {
						t.Fatalf("out-of-band delete: %v", err)
					}
					waitNotFound(t, func() error { _, err := api.Client.GetFunction(context.Background(), api.Namespace, name); return err })
				},
				Config: cfg(256, "b"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(addr, plancheck.ResourceActionCreate),
				}},
				Check: answers(api, addr, "two", "b"),
			},
		},
	})
}

// Code whose handler moves, and code in another language, each applied
// with its new entrypoint and runtime in one apply.
func TestAccCodeMovesHandlerInOneApply(t *testing.T) {
	api := startAPI(t)
	dir := t.TempDir()
	name := "tf-move-" + fmt.Sprint(time.Now().UnixNano()%100000)
	addr := "sless_function.moving"
	cfg := func(runtime, entrypoint string) string {
		return hcl("", fmt.Sprintf(`resource "sless_function" "moving" {
  name         = %q
  runtime      = %q
  entrypoint   = %q
  source_dir   = %q
  env          = { GREETING = "g" }
  wait_timeout = "3m"
}
`, name, runtime, entrypoint, dir))
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories(),
		CheckDestroy:             functionGone(api, api.Namespace, name),
		Steps: []resource.TestStep{
			{
				PreConfig: func() { setTree(t, dir, pyHello("first")) },
				Config:    cfg("python3.12", "main.handler"),
				Check:     answers(api, addr, "first", "g"),
			},
			{
				// main.py becomes handlers.py with another function name.
				PreConfig: func() {
					setTree(t, dir, map[string]string{"handlers.py": `import os


def serve(event, context):
    return {"greeting": "moved", "env": os.environ.get("GREETING", "")}
`})
				},
				Config: cfg("python3.12", "handlers.serve"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("entrypoint"), knownvalue.StringExact("handlers.serve")),
				},
				Check: answers(api, addr, "moved", "g"),
			},
			{
				// Rewritten in JavaScript.
				PreConfig: func() {
					setTree(t, dir, map[string]string{"app.js": `exports.handle = async () => ({ greeting: "node", env: process.env.GREETING || "" });
`})
				},
				Config: cfg("nodejs22", "app.handle"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("runtime"), knownvalue.StringExact("nodejs22")),
				},
				Check: answers(api, addr, "node", "g"),
			},
		},
	})
}

func waitNotFound(t *testing.T, get func() error) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		err := get()
		if client.IsNotFound(err) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still there a minute after delete: %v", err)
		}
	}
}

// Triggers and jobs: create, update in place, import, re-run a job with a
// new run_id, destroy.
func TestAccTriggersAndJob(t *testing.T) {
	api := startAPI(t)
	dir := t.TempDir()
	setTree(t, dir, pyHello("job"))
	suffix := fmt.Sprint(time.Now().UnixNano() % 100000)
	fn := "tf-tj-" + suffix
	cfg := func(enabled bool, schedule string, runID int) string {
		return hcl("", fmt.Sprintf(`resource "sless_function" "f" {
  name       = %q
  runtime    = "python3.12"
  entrypoint = "main.handler"
  source_dir = %q
}

resource "sless_trigger" "http" {
  name     = "%s-http"
  function = sless_function.f.name
  type     = "http"
  enabled  = %t
}

resource "sless_trigger" "cron" {
  name      = "%s-cron"
  function  = sless_function.f.name
  type      = "cron"
  schedule  = %q
  time_zone = "Europe/Berlin"
  payload   = jsonencode({ b = 1, a = [1, 2] })
}

resource "sless_job" "once" {
  name     = "%s-job"
  function = sless_function.f.name
  run_id   = %d
  payload  = jsonencode({ name = "job" })
}
`, fn, dir, fn, enabled, fn, schedule, fn, runID))
	}
	output := statecheck.CompareValue(compare.ValuesSame())
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories(),
		CheckDestroy: func(s *terraform.State) error {
			ctx := context.Background()
			if _, err := api.Client.GetTrigger(ctx, api.Namespace, fn+"-http"); !client.IsNotFound(err) {
				return fmt.Errorf("http trigger after destroy: %v", err)
			}
			if _, err := api.Client.GetJob(ctx, api.Namespace, fn+"-job"); !client.IsNotFound(err) {
				return fmt.Errorf("job after destroy: %v", err)
			}
			return functionGone(api, api.Namespace, fn)(s)
		},
		Steps: []resource.TestStep{
			{
				Config: cfg(true, "*/5 * * * *", 1),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("sless_trigger.http", tfjsonpath.New("enabled"), knownvalue.Bool(true)),
					statecheck.ExpectKnownValue("sless_trigger.cron", tfjsonpath.New("schedule"), knownvalue.StringExact("*/5 * * * *")),
					statecheck.ExpectKnownValue("sless_trigger.cron", tfjsonpath.New("queue"), knownvalue.Null()),
					statecheck.ExpectKnownValue("sless_trigger.cron", tfjsonpath.New("pre_warm_seconds"), knownvalue.Null()),
					statecheck.ExpectKnownValue("sless_job.once", tfjsonpath.New("phase"), knownvalue.StringExact("Succeeded")),
					statecheck.ExpectKnownValue("sless_job.once", tfjsonpath.New("output"), knownvalue.StringRegexp(regexp.MustCompile(`"greeting"`))),
					output.AddStateValue("sless_job.once", tfjsonpath.New("phase")),
				},
			},
			{
				// Disable the route and move the schedule in place; the same
				// run_id runs nothing again.
				Config: cfg(false, "@hourly", 1),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("sless_trigger.http", plancheck.ResourceActionUpdate),
					plancheck.ExpectResourceAction("sless_trigger.cron", plancheck.ResourceActionUpdate),
					plancheck.ExpectResourceAction("sless_job.once", plancheck.ResourceActionNoop),
					plancheck.ExpectResourceAction("sless_function.f", plancheck.ResourceActionNoop),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("sless_trigger.http", tfjsonpath.New("enabled"), knownvalue.Bool(false)),
					statecheck.ExpectKnownValue("sless_trigger.cron", tfjsonpath.New("schedule"), knownvalue.StringExact("@hourly")),
				},
			},
			{
				// A new run_id runs the job again.
				Config: cfg(false, "@hourly", 2),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("sless_job.once", plancheck.ResourceActionUpdate),
					plancheck.ExpectUnknownValue("sless_job.once", tfjsonpath.New("output")),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("sless_job.once", tfjsonpath.New("run_id"), knownvalue.Int64Exact(2)),
					output.AddStateValue("sless_job.once", tfjsonpath.New("phase")),
				},
			},
			{ResourceName: "sless_trigger.http", ImportState: true, ImportStateId: api.Namespace + "/" + fn + "-http", ImportStateVerify: true},
			{ResourceName: "sless_trigger.cron", ImportState: true, ImportStateId: api.Namespace + "/" + fn + "-cron", ImportStateVerify: true},
			{ResourceName: "sless_job.once", ImportState: true, ImportStateId: api.Namespace + "/" + fn + "-job", ImportStateVerify: true,
				ImportStateVerifyIgnore: []string{"wait_timeout"}},
		},
	})
}

// The data sources read what the resources made.
func TestAccDataSources(t *testing.T) {
	api := startAPI(t)
	dir := t.TempDir()
	setTree(t, dir, pyHello("data"))
	name := "tf-ds-" + fmt.Sprint(time.Now().UnixNano()%100000)
	res := fmt.Sprintf(`resource "sless_function" "f" {
  name       = %q
  runtime    = "python3.12"
  entrypoint = "main.handler"
  source_dir = %q
  env        = { A = "1" }
  scale      = { max = 2 }

  build_timeout_sec = 300
}
`, name, dir)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories(),
		Steps: []resource.TestStep{
			{Config: hcl("", res)},
			{
				Config: hcl("", res+`
data "sless_function" "f" {
  name = sless_function.f.name
}

data "sless_functions" "all" {
  depends_on = [sless_function.f]
}
`),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.CompareValuePairs("data.sless_function.f", tfjsonpath.New("url"), "sless_function.f", tfjsonpath.New("url"), compare.ValuesSame()),
					statecheck.CompareValuePairs("data.sless_function.f", tfjsonpath.New("source_sha256"), "sless_function.f", tfjsonpath.New("source_sha256"), compare.ValuesSame()),
					statecheck.ExpectKnownValue("data.sless_function.f", tfjsonpath.New("ready"), knownvalue.Bool(true)),
					statecheck.ExpectKnownValue("data.sless_function.f", tfjsonpath.New("env").AtMapKey("A"), knownvalue.StringExact("1")),
					// Every setting, not only some: scale and the build timeout too.
					statecheck.ExpectKnownValue("data.sless_function.f", tfjsonpath.New("scale").AtMapKey("max"), knownvalue.Int64Exact(2)),
					statecheck.ExpectKnownValue("data.sless_function.f", tfjsonpath.New("scale").AtMapKey("min"), knownvalue.Null()),
					statecheck.ExpectKnownValue("data.sless_function.f", tfjsonpath.New("build_timeout_sec"), knownvalue.Int64Exact(300)),
					statecheck.ExpectKnownValue("data.sless_function.f", tfjsonpath.New("secret_env"), knownvalue.Null()),
					statecheck.ExpectKnownValue("data.sless_functions.all", tfjsonpath.New("namespace"), knownvalue.StringExact(api.Namespace)),
					statecheck.ExpectKnownValue("data.sless_functions.all", tfjsonpath.New("functions"),
						knownvalue.ListPartial(map[int]knownvalue.Check{})),
				},
				Check: resource.TestCheckTypeSetElemNestedAttrs("data.sless_functions.all", "functions.*", map[string]string{"name": name, "phase": "Ready"}),
			},
		},
	})
}

// The example configuration applies and destroys cleanly.
func TestAccExampleConfiguration(t *testing.T) {
	api := startAPI(t)
	resource.Test(t, resource.TestCase{
		// The example has its own provider block, so the provider is given
		// to the step rather than the case.
		CheckDestroy: functionGone(api, api.Namespace, "hello-tf"),
		Steps: []resource.TestStep{{
			ProtoV6ProviderFactories: providerFactories(),
			ConfigDirectory:          config.StaticDirectory(filepath.Join(repoRoot(), "examples", "terraform")),
			ConfigVariables: config.Variables{
				"greeting": config.StringVariable("Hi"),
				// The test framework copies the directory's files, not its
				// subdirectories: point at the example's code where it is.
				"source_dir": config.StringVariable(filepath.Join(repoRoot(), "examples", "terraform", "hello")),
			},
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("sless_function.hello", tfjsonpath.New("phase"), knownvalue.StringExact("Ready")),
				statecheck.ExpectKnownValue("sless_job.once", tfjsonpath.New("phase"), knownvalue.StringExact("Succeeded")),
				statecheck.ExpectKnownOutputValue("job_output", knownvalue.StringRegexp(regexp.MustCompile(`Hi, job!`))),
			},
		}},
	})
}

// A build that fails fails the apply with the build's own message, and the
// function is in state (tainted) so the next apply replaces it.
func TestAccFailedBuildIsAnError(t *testing.T) {
	api := startAPI(t)
	dir := t.TempDir()
	setTree(t, dir, map[string]string{
		"go.mod": "module example.com/broken\n\ngo 1.24\n",
		"broken.go": `package broken

import "context"

func Handle(ctx context.Context, ev map[string]any) (string, error) {
	return undefinedName, nil
}
`,
	})
	name := "tf-broken-" + fmt.Sprint(time.Now().UnixNano()%100000)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories(),
		CheckDestroy:             functionGone(api, api.Namespace, name),
		Steps: []resource.TestStep{{
			Config: hcl("", fmt.Sprintf(`resource "sless_function" "broken" {
  name         = %q
  runtime      = "go1.24"
  entrypoint   = "broken.Handle"
  source_dir   = %q
  wait_timeout = "4m"
}
`, name, dir)),
			ExpectError: regexp.MustCompile(`(?s)Function not ready.*the build of function .*` + name + `.* failed.*undefinedName`),
		}},
	})
}

// An apply of the same configuration after a failed build does not say
// "No changes": the function is not Ready, so the plan shows phase going to
// Ready, and the apply runs the failed build again (spec.rebuild). Here the
// build failed for a passing reason, a package its index did not have yet;
// once the index has it, that apply builds the same code and serves it.
func TestAccFailedBuildIsNotNoChanges(t *testing.T) {
	api := startAPI(t)
	dir := t.TempDir()
	index := t.TempDir() // the package index, outside the code
	needy := pyHello("needy")
	needy["requirements.txt"] = "--no-index\n--find-links " + index + "\nslessretrypkg\n"
	name := "tf-retry-" + fmt.Sprint(time.Now().UnixNano()%100000)
	addr := "sless_function.f"
	cfg := hcl("", fmt.Sprintf(`resource "sless_function" "f" {
  name         = %q
  runtime      = "python3.12"
  entrypoint   = "main.handler"
  source_dir   = %q
  wait_timeout = "4m"
}
`, name, dir))
	buildFailed := `(?s)Function not ready.*the build of function .*` + name + `.* failed.*slessretrypkg`
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories(),
		CheckDestroy:             functionGone(api, api.Namespace, name),
		Steps: []resource.TestStep{
			{PreConfig: func() { setTree(t, dir, pyHello("one")) }, Config: cfg},
			{
				// An update whose build fails: the function stays in state,
				// untainted, Failed, the first revision serving.
				PreConfig:   func() { setTree(t, dir, needy) },
				Config:      cfg,
				ExpectError: regexp.MustCompile(buildFailed),
			},
			{
				// The same again, the index still without the package: the
				// build runs again and fails again, and the apply says so.
				Config: cfg,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue(addr, tfjsonpath.New("phase"), knownvalue.StringExact("Ready")),
				}},
				ExpectError: regexp.MustCompile(buildFailed + `.*was\s+run\s+again\s+\(spec\.rebuild\s+[^)]+\)\s+and\s+failed\s+again`),
			},
			{
				// The index has the package now: the same code builds.
				PreConfig: func() { writeWheel(t, index, "slessretrypkg") },
				Config:    cfg,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("phase"), knownvalue.StringExact("Ready")),
				},
				Check: answers(api, addr, "needy", ""),
			},
			{Config: cfg, PlanOnly: true},
		},
	})
}

// writeWheel puts a pure-Python wheel of pkg, version 1.0, in dir, as a
// package index (pip --find-links) holds it.
func writeWheel(t *testing.T, dir, pkg string) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, pkg+"-1.0-py3-none-any.whl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z := zip.NewWriter(f)
	info := pkg + "-1.0.dist-info/"
	for _, e := range [][2]string{
		{pkg + "/__init__.py", "VALUE = 1\n"},
		{info + "METADATA", "Metadata-Version: 2.1\nName: " + pkg + "\nVersion: 1.0\n"},
		{info + "WHEEL", "Wheel-Version: 1.0\nGenerator: sless-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
		{info + "RECORD", pkg + "/__init__.py,,\n" + info + "METADATA,,\n" + info + "WHEEL,,\n" + info + "RECORD,,\n"},
	} {
		w, err := z.Create(e[0])
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(w, e[1]); err != nil {
			t.Fatal(err)
		}
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
}

// A function that is not Ready when the create's wait_timeout ends (a slow
// build; here, a slow start) is kept, not tainted: the next apply waits for
// it rather than deleting it and starting over.
func TestAccSlowStartIsWaitedForNotReplaced(t *testing.T) {
	api := startAPI(t)
	dir := t.TempDir()
	name := "tf-slow-" + fmt.Sprint(time.Now().UnixNano()%100000)
	// The wrapper answers its health check once the module is imported, so
	// the revision is not Ready for 25 s, whatever the machine's speed.
	files := pyHello(name)
	files["main.py"] = "import time\n\ntime.sleep(25)\n\n" + files["main.py"]
	setTree(t, dir, files)
	addr := "sless_function.f"
	cfg := func(wait string) string {
		return hcl("", fmt.Sprintf(`resource "sless_function" "f" {
  name         = %q
  runtime      = "python3.12"
  entrypoint   = "main.handler"
  source_dir   = %q
  wait_timeout = %q
}
`, name, dir, wait))
	}
	var uid string
	sameFunction := func(*terraform.State) error {
		fn, err := api.Client.GetFunction(context.Background(), api.Namespace, name)
		if err != nil {
			return err
		}
		if uid == "" {
			uid = string(fn.UID)
		}
		if string(fn.UID) != uid {
			return fmt.Errorf("function %s was made again (uid %s, first %s)", name, fn.UID, uid)
		}
		return nil
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories(),
		CheckDestroy:             functionGone(api, api.Namespace, name),
		Steps: []resource.TestStep{
			{
				// The apply warns and succeeds; the plan after it waits for
				// Ready.
				Config:             cfg("2s"),
				ExpectNonEmptyPlan: true,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("phase"), knownvalue.StringRegexp(regexp.MustCompile(`^(Pending|Building|Deploying)$`))),
				},
				Check: sameFunction,
			},
			{
				Config: cfg("5m"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue(addr, tfjsonpath.New("phase"), knownvalue.StringExact("Ready")),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("phase"), knownvalue.StringExact("Ready")),
				},
				Check: resource.ComposeTestCheckFunc(sameFunction, answers(api, addr, name, "")),
			},
		},
	})
}
