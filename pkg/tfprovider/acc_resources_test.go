package tfprovider

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
)

// resources and placement on sless_function and sless_service: memory in
// resources without memory_mb applies (the provider no longer sends a
// default memory_mb beside it) and plans empty after; a key or a block
// removed from the configuration goes from the server too.
func TestAccResourcesAndPlacement(t *testing.T) {
	api := startAPI(t)
	dir, svcDir := t.TempDir(), t.TempDir()
	setTree(t, dir, pyHello("one"))
	setTree(t, svcDir, wsgiHello("one"))
	suffix := fmt.Sprint(time.Now().UnixNano() % 100000)
	fnName, svcName := "tf-res-"+suffix, "tf-res-svc-"+suffix
	fn, svc := "sless_function.res", "sless_service.res"
	cfg := func(fnAttrs, svcAttrs string) string {
		return hcl("", fmt.Sprintf(`resource "sless_function" "res" {
  name         = %q
  runtime      = "python3.12"
  entrypoint   = "main.handler"
  source_dir   = %q
  wait_timeout = "3m"
%s}

resource "sless_service" "res" {
  name         = %q
  runtime      = "python3.12"
  entrypoint   = "app.app"
  source_dir   = %q
  wait_timeout = "3m"
%s}

data "sless_function" "res" {
  name = sless_function.res.name
}
`, fnName, dir, fnAttrs, svcName, svcDir, svcAttrs))
	}
	first := cfg(`  resources = {
    requests = { cpu = "0.25" }
    limits   = { memory = "256Mi", cpu = "1" }
  }
  node_selector       = { "disktype" = "ssd" }
  tolerations         = [{ key = "dedicated", operator = "Equal", value = "fn", effect = "NoSchedule" }]
  node_affinity_json  = jsonencode({ requiredDuringSchedulingIgnoredDuringExecution = { nodeSelectorTerms = [{ matchExpressions = [{ key = "zone", operator = "In", values = ["a"] }] }] } })
  priority_class_name = "batch"
  runtime_class_name  = "runsc"
`, `  resources     = { limits = { memory = "128Mi" } }
  node_selector = { "disktype" = "ssd" }
`)
	second := cfg(`  resources = { limits = { memory = "512Mi" } }
`, `  memory_mb = 192
`)

	// server checks the Function the API holds.
	server := func(check func(s slessv1alpha1.FunctionSpec) error) resource.TestCheckFunc {
		return func(*terraform.State) error {
			f, err := api.Client.GetFunction(context.Background(), api.Namespace, fnName)
			if err != nil {
				return err
			}
			return check(f.Spec)
		}
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories(),
		CheckDestroy: func(st *terraform.State) error {
			if err := functionGone(api, api.Namespace, fnName)(st); err != nil {
				return err
			}
			return serviceGone(api, svcName)(st)
		},
		Steps: []resource.TestStep{
			{
				Config: first,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(fn, tfjsonpath.New("memory_mb"), knownvalue.Null()),
					// The user's spelling stays: 0.25 is 250m on the server.
					statecheck.ExpectKnownValue(fn, tfjsonpath.New("resources").AtMapKey("requests").AtMapKey("cpu"), knownvalue.StringExact("0.25")),
					statecheck.ExpectKnownValue(fn, tfjsonpath.New("resources").AtMapKey("limits").AtMapKey("memory"), knownvalue.StringExact("256Mi")),
					statecheck.ExpectKnownValue(fn, tfjsonpath.New("phase"), knownvalue.StringExact("Ready")),
					statecheck.ExpectKnownValue(svc, tfjsonpath.New("memory_mb"), knownvalue.Null()),
					statecheck.ExpectKnownValue(svc, tfjsonpath.New("node_selector").AtMapKey("disktype"), knownvalue.StringExact("ssd")),
					// The data source reads the API's spelling.
					statecheck.ExpectKnownValue("data.sless_function.res", tfjsonpath.New("resources").AtMapKey("requests").AtMapKey("cpu"), knownvalue.StringExact("250m")),
					statecheck.ExpectKnownValue("data.sless_function.res", tfjsonpath.New("tolerations").AtSliceIndex(0).AtMapKey("key"), knownvalue.StringExact("dedicated")),
					statecheck.ExpectKnownValue("data.sless_function.res", tfjsonpath.New("runtime_class_name"), knownvalue.StringExact("runsc")),
				},
				Check: server(func(s slessv1alpha1.FunctionSpec) error {
					switch {
					case s.MemoryMB != nil:
						return fmt.Errorf("memoryMB %d sent beside resources", *s.MemoryMB)
					case s.Resources == nil || s.Resources.Limits.Memory().String() != "256Mi" || s.Resources.Requests.Cpu().String() != "250m":
						return fmt.Errorf("resources on the server: %+v", s.Resources)
					case s.NodeSelector["disktype"] != "ssd" || len(s.Tolerations) != 1 || s.Tolerations[0].Value != "fn":
						return fmt.Errorf("placement on the server: %v %v", s.NodeSelector, s.Tolerations)
					case s.Affinity == nil || s.Affinity.NodeAffinity == nil || s.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil:
						return fmt.Errorf("node affinity on the server: %+v", s.Affinity)
					case s.PriorityClassName != "batch" || s.RuntimeClassName == nil || *s.RuntimeClassName != "runsc":
						return fmt.Errorf("classes on the server: %q %v", s.PriorityClassName, s.RuntimeClassName)
					}
					return nil
				}),
			},
			{
				Config: second,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(fn, plancheck.ResourceActionUpdate),
					plancheck.ExpectResourceAction(svc, plancheck.ResourceActionUpdate),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(fn, tfjsonpath.New("node_selector"), knownvalue.Null()),
					statecheck.ExpectKnownValue(fn, tfjsonpath.New("resources").AtMapKey("requests"), knownvalue.Null()),
					statecheck.ExpectKnownValue(svc, tfjsonpath.New("resources"), knownvalue.Null()),
					statecheck.ExpectKnownValue(svc, tfjsonpath.New("memory_mb"), knownvalue.Int64Exact(192)),
					statecheck.ExpectKnownValue("data.sless_function.res", tfjsonpath.New("tolerations"), knownvalue.Null()),
				},
				Check: server(func(s slessv1alpha1.FunctionSpec) error {
					switch {
					case s.Resources == nil || len(s.Resources.Requests) != 0 || len(s.Resources.Limits) != 1 || s.Resources.Limits.Memory().String() != "512Mi":
						return fmt.Errorf("resources on the server after the change: %+v", s.Resources)
					case s.NodeSelector != nil || s.Tolerations != nil || s.Affinity != nil || s.PriorityClassName != "" || s.RuntimeClassName != nil:
						return fmt.Errorf("placement left on the server: %+v", s)
					}
					return nil
				}),
			},
		},
	})
}
