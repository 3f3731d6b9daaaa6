package tfprovider

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/config"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/client"
)

// wsgiHello is a WSGI web app that answers its greeting, an environment
// variable and the path it was called with.
func wsgiHello(greeting string) map[string]string {
	return map[string]string{"app.py": fmt.Sprintf(`import os


def app(environ, start_response):
    body = "%%s|%%s|%%s" %% (%q, os.environ.get("GREETING", ""), environ.get("PATH_INFO", ""))
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [body.encode()]
`, greeting)}
}

func serviceGone(api *accAPI, name string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		if _, err := api.Client.GetService(context.Background(), api.Namespace, name); !client.IsNotFound(err) {
			return fmt.Errorf("service %s after destroy: %v", name, err)
		}
		return nil
	}
}

// serviceHas checks the SlessService the API holds.
func serviceHas(api *accAPI, name string, check func(*slessv1alpha1.SlessService) error) resource.TestCheckFunc {
	return func(*terraform.State) error {
		svc, err := api.Client.GetService(context.Background(), api.Namespace, name)
		if err != nil {
			return err
		}
		return check(svc)
	}
}

// serviceAnswers calls the service under /svc/ with a path of its own and
// checks that the app saw the whole path and answered with its greeting.
func serviceAnswers(api *accAPI, name, greeting, env string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		url := api.Endpoint + "/svc/" + api.Namespace + "/" + name + "/notes/7"
		want := greeting + "|" + env + "|/notes/7"
		var last string
		for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
			req, _ := http.NewRequest(http.MethodGet, url, nil)
			req.Header.Set("Authorization", "Bearer "+api.Token)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				last = err.Error()
				continue
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode == http.StatusOK && string(b) == want {
				return nil
			}
			last = fmt.Sprintf("%d %s", res.StatusCode, b)
		}
		return fmt.Errorf("GET %s: %s, want 200 %q", url, last, want)
	}
}

// servesServices says whether the API under test builds and runs
// SlessServices to Ready (sless dev does once it runs them as processes);
// it asks with a throwaway service, once.
func servesServices(t *testing.T, api *accAPI) bool {
	t.Helper()
	servesOnce.Do(func() {
		ctx := context.Background()
		name := "tf-svc-probe-" + fmt.Sprint(time.Now().UnixNano()%100000)
		svc := serviceObject(api.Namespace, name, slessv1alpha1.FunctionSpec{
			WorkloadSpec: slessv1alpha1.WorkloadSpec{
				Runtime:    "python3.12",
				Entrypoint: "app.app",
				Source:     slessv1alpha1.FunctionSource{Inline: &slessv1alpha1.InlineSource{Files: wsgiHello("probe")}},
			},
		})
		if _, err := api.Client.CreateService(ctx, svc); err != nil {
			servesErr = err
			return
		}
		defer func() { _ = api.Client.DeleteService(ctx, api.Namespace, name) }()
		for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
			got, err := api.Client.GetService(ctx, api.Namespace, name)
			if err == nil && got.IsReady() {
				serves = true
				return
			}
		}
	})
	if servesErr != nil {
		t.Fatalf("creating a probe service: %v", servesErr)
	}
	if !serves {
		t.Log("the API under test leaves SlessServices unbuilt (sless dev before it runs services): the steps that need Ready are left out")
	}
	return serves
}

var (
	servesOnce sync.Once
	serves     bool
	servesErr  error
)

// The sless_service life: create from a directory with the API's defaults
// in state (min_scale 1, timeout_sec 300), no change planned after apply,
// scale and env updated in place, new code, import by namespace/name, and
// destroy. Where the server builds services, each apply waits for Ready and
// the app answers under /svc/ with the whole path passed through.
func TestAccServiceLifecycle(t *testing.T) {
	api := startAPI(t)
	ready := servesServices(t, api)
	dir := t.TempDir()
	name := "tf-svc-" + fmt.Sprint(time.Now().UnixNano()%100000)
	addr := "sless_service.web"
	wait := "3m"
	if !ready {
		wait = "1s"
	}
	cfg := func(scale, greetingEnv string) string {
		return hcl("", fmt.Sprintf(`resource "sless_service" "web" {
  name         = %q
  runtime      = "python3.12"
  entrypoint   = "app.app"
  source_dir   = %q
  env          = { GREETING = %q }
  wait_timeout = %q
%s
}
`, name, dir, greetingEnv, wait, scale))
	}
	// Without Ready, an update fails its apply at wait_timeout and runs no
	// checks: those of the API's object run before the next step instead.
	var pending resource.TestCheckFunc
	runPending := func() {
		if pending != nil {
			if err := pending(nil); err != nil {
				t.Fatal(err)
			}
			pending = nil
		}
	}
	step := func(s resource.TestStep, greeting, env string, update bool) resource.TestStep {
		before := s.PreConfig
		s.PreConfig = func() {
			runPending()
			if before != nil {
				before()
			}
		}
		switch {
		case ready:
			s.Check = resource.ComposeTestCheckFunc(s.Check, serviceAnswers(api, name, greeting, env))
			s.ConfigStateChecks = append(s.ConfigStateChecks, statecheck.ExpectKnownValue(addr, tfjsonpath.New("phase"), knownvalue.StringExact("Ready")))
		case update:
			check := s.Check
			s.Check = nil
			s.PreConfig = func() {
				runPending()
				if before != nil {
					before()
				}
				pending = check
			}
			s.ExpectError = regexp.MustCompile(`service \S+ was not Ready within 1s`)
		default:
			// A create not Ready warns; the plan after it asks to wait again.
			s.ExpectNonEmptyPlan = true
		}
		return s
	}
	var firstSHA string
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories(),
		CheckDestroy:             serviceGone(api, name),
		Steps: []resource.TestStep{
			step(resource.TestStep{
				PreConfig: func() { setTree(t, dir, wsgiHello("one")) },
				Config:    cfg("", "a"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(addr, plancheck.ResourceActionCreate),
					plancheck.ExpectKnownValue(addr, tfjsonpath.New("source_sha256"), knownvalue.StringRegexp(regexp.MustCompile(`^[a-f0-9]{64}$`))),
					plancheck.ExpectKnownValue(addr, tfjsonpath.New("min_scale"), knownvalue.Int64Exact(1)),
					plancheck.ExpectKnownValue(addr, tfjsonpath.New("timeout_sec"), knownvalue.Int64Exact(slessv1alpha1.DefaultServiceTimeoutSeconds)),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("id"), knownvalue.StringExact(api.Namespace+"/"+name)),
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("max_scale"), knownvalue.Null()),
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("container_concurrency"), knownvalue.Null()),
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("image"), knownvalue.Null()),
				},
				Check: resource.ComposeTestCheckFunc(
					func(s *terraform.State) error {
						firstSHA = s.RootModule().Resources[addr].Primary.Attributes["source_sha256"]
						return nil
					},
					serviceHas(api, name, func(svc *slessv1alpha1.SlessService) error {
						a := svc.Spec.Source.Archive
						if a == nil || a.SHA256 != firstSHA || !strings.HasPrefix(a.Key, "_services/"+api.Namespace+"/"+name+"/source/") {
							return fmt.Errorf("spec.source %+v, want the upload of %s", svc.Spec.Source, firstSHA)
						}
						if svc.Spec.Runtime != "python3.12" || svc.Spec.Entrypoint != "app.app" || len(svc.Spec.Env) != 1 || svc.Spec.Env[0].Value != "a" {
							return fmt.Errorf("spec %+v", svc.Spec)
						}
						return nil
					}),
				),
			}, "one", "a", false),
			step(resource.TestStep{
				// Scale and env change in place.
				Config: cfg("  min_scale = 0\n  max_scale = 3\n  container_concurrency = 10", "b"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate),
				}},
				Check: serviceHas(api, name, func(svc *slessv1alpha1.SlessService) error {
					sp := svc.Spec
					if sp.MinScale == nil || *sp.MinScale != 0 || sp.MaxScale == nil || *sp.MaxScale != 3 ||
						sp.ContainerConcurrency == nil || *sp.ContainerConcurrency != 10 || sp.Env[0].Value != "b" {
						return fmt.Errorf("spec after update: %+v", sp)
					}
					return nil
				}),
			}, "one", "b", true),
			step(resource.TestStep{
				// Bounds removed from the configuration go from the server
				// (min_scale back to its default); new code is uploaded.
				PreConfig: func() { setTree(t, dir, wsgiHello("two")) },
				Config:    cfg("", "b"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate),
					plancheck.ExpectUnknownValue(addr, tfjsonpath.New("resolved_image")),
				}},
				Check: serviceHas(api, name, func(svc *slessv1alpha1.SlessService) error {
					sp := svc.Spec
					if sp.MinScale == nil || *sp.MinScale != 1 || sp.MaxScale != nil || sp.ContainerConcurrency != nil ||
						sp.Source.Archive == nil || sp.Source.Archive.SHA256 == firstSHA {
						return fmt.Errorf("spec after new code: %+v", sp)
					}
					return nil
				}),
			}, "two", "b", true),
			{
				PreConfig:               runPending,
				ResourceName:            addr,
				ImportState:             true,
				ImportStateId:           api.Namespace + "/" + name,
				ImportStateVerify:       true,
				ImportStateVerifyIgnore: []string{"source_dir", "wait_timeout"},
			},
		},
	})
}

// A sless_secret and a sless_service whose env refers to it: applied
// together, planned empty, both imported, both destroyed.
func TestAccServiceWithSecret(t *testing.T) {
	api := startAPI(t)
	ready := servesServices(t, api)
	dir := t.TempDir()
	setTree(t, dir, wsgiHello("db"))
	suffix := fmt.Sprint(time.Now().UnixNano() % 100000)
	svcName, secretName := "tf-svc-db-"+suffix, "tf-svc-db-"+suffix
	wait := "3m"
	if !ready {
		wait = "1s"
	}
	config := hcl("", fmt.Sprintf(`resource "sless_secret" "db" {
  name = %q
  data = { password = "s3cret-Zq9" }
}

resource "sless_service" "notes" {
  name         = %q
  runtime      = "python3.12"
  entrypoint   = "app.app"
  source_dir   = %q
  wait_timeout = %q
  secret_env = {
    GREETING = { secret = sless_secret.db.name, key = "password" }
  }
}
`, secretName, svcName, dir, wait))
	apply := resource.TestStep{
		Config: config,
		ConfigStateChecks: []statecheck.StateCheck{
			statecheck.ExpectKnownValue("sless_service.notes", tfjsonpath.New("secret_env"), knownvalue.MapExact(map[string]knownvalue.Check{
				"GREETING": knownvalue.ObjectExact(map[string]knownvalue.Check{"secret": knownvalue.StringExact(secretName), "key": knownvalue.StringExact("password")}),
			})),
		},
		Check: serviceHas(api, svcName, func(svc *slessv1alpha1.SlessService) error {
			if len(svc.Spec.Env) != 1 || svc.Spec.Env[0].ValueFrom == nil || svc.Spec.Env[0].ValueFrom.SecretKeyRef == nil ||
				svc.Spec.Env[0].ValueFrom.SecretKeyRef.Name != secretName || svc.Spec.Env[0].Value != "" {
				return fmt.Errorf("env %+v", svc.Spec.Env)
			}
			return nil
		}),
	}
	if ready {
		// The app reads the secret's value from its environment.
		apply.Check = resource.ComposeTestCheckFunc(apply.Check, serviceAnswers(api, svcName, "db", "s3cret-Zq9"))
	} else {
		apply.ExpectNonEmptyPlan = true
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories(),
		CheckDestroy: resource.ComposeTestCheckFunc(serviceGone(api, svcName), func(s *terraform.State) error {
			return secretGone(api, secretName)(s)
		}),
		Steps: []resource.TestStep{
			apply,
			{
				ResourceName: "sless_service.notes", ImportState: true, ImportStateVerify: true,
				ImportStateId:           api.Namespace + "/" + svcName,
				ImportStateVerifyIgnore: []string{"source_dir", "wait_timeout"},
			},
			{
				ResourceName: "sless_secret.db", ImportState: true, ImportStateVerify: true,
				ImportStateId:           api.Namespace + "/" + secretName,
				ImportStateVerifyIgnore: []string{"data", "data.%", "data.password"},
			},
		},
	})
}

// Bad sless_service configurations are refused at plan, naming the
// attribute, by the validation the API runs.
func TestAccServiceRefusesBadConfig(t *testing.T) {
	accCLI(t)
	src := writeTree(t, wsgiHello("bad"))
	provider := `  endpoint  = "http://127.0.0.1:9"
  token     = "unused"
  namespace = "acc"`
	svc := func(attrs string) string {
		return hcl(provider, fmt.Sprintf(`resource "sless_service" "bad" {
  name    = "bad"
  runtime = "python3.12"
%s
}
`, attrs))
	}
	withCode := fmt.Sprintf("  entrypoint = \"app.app\"\n  source_dir = %q\n", src)
	for _, tc := range []struct{ name, config, want string }{
		{"max below min", svc(withCode + "  min_scale = 3\n  max_scale = 2"), `max_scale.*maxScale must be greater than or equal to minScale`},
		{"negative min", svc(withCode + "  min_scale = -1"), `min_scale.*(out of range|between 0 and 1000)`},
		{"max zero", svc(withCode + "  max_scale = 0"), `max_scale.*(out of range|between 1 and 1000)`},
		{"concurrency too high", svc(withCode + "  container_concurrency = 5000"), `container_concurrency.*between 0 and 1000`},
		{"timeout above 900", svc(withCode + "  timeout_sec = 901"), `timeout_sec.*between 1 and 900`},
		{"no source", svc(`  entrypoint = "app.app"`), `exactly one of source_dir, source_zip and image must be set`},
		{"no entrypoint", svc(fmt.Sprintf("  source_dir = %q", src)), `entrypoint.*required`},
		{"entrypoint not in the code", svc(fmt.Sprintf("  entrypoint = \"web.app\"\n  source_dir = %q", src)), `Entrypoint not found in the source`},
		{"bad name", strings.Replace(svc(withCode), `name    = "bad"`, `name    = "9lives"`, 1), `name.*DNS-1035`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resource.Test(t, resource.TestCase{
				ProtoV6ProviderFactories: providerFactories(),
				Steps: []resource.TestStep{{
					Config:      tc.config,
					PlanOnly:    true,
					ExpectError: regexp.MustCompile(`(?s)` + strings.ReplaceAll(tc.want, " ", `\s+`)),
				}},
			})
		})
	}
}

// examples/terraform/service plans (and, where the server builds services,
// applies to a Ready service and destroys).
func TestAccServiceExample(t *testing.T) {
	api := startAPI(t)
	ready := servesServices(t, api)
	step := resource.TestStep{
		ProtoV6ProviderFactories: providerFactories(),
		ConfigDirectory:          config.StaticDirectory(filepath.Join(repoRoot(), "examples", "terraform", "service")),
		ConfigVariables: config.Variables{
			"greeting": config.StringVariable("Hi"),
			// The framework copies the directory's files, not its folders.
			"source_dir": config.StringVariable(filepath.Join(repoRoot(), "examples", "terraform", "service", "web")),
		},
	}
	if ready {
		step.ConfigStateChecks = []statecheck.StateCheck{
			statecheck.ExpectKnownValue("sless_service.web", tfjsonpath.New("phase"), knownvalue.StringExact("Ready")),
		}
	} else {
		step.PlanOnly, step.ExpectNonEmptyPlan = true, true
	}
	resource.Test(t, resource.TestCase{CheckDestroy: serviceGone(api, "web-tf"), Steps: []resource.TestStep{step}})
}
