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

	"github.com/sless-dev/sless/pkg/client"
)

// namespace left out means the provider's namespace, for an object that
// exists as for a new one: removing it from the configuration moves each
// object back to the provider's namespace (a replacement), instead of
// leaving it where it was with no change planned.
func TestAccRemovedNamespaceMovesToTheProvidersNamespace(t *testing.T) {
	api := startAPI(t)
	dir := t.TempDir()
	setTree(t, dir, pyHello("ns"))
	suffix := fmt.Sprint(time.Now().UnixNano() % 100000)
	other := "tf-other-" + suffix
	fn, trig, job := "tf-nsf-"+suffix, "tf-nst-"+suffix, "tf-nsj-"+suffix
	cfg := func(nsLine string) string {
		return hcl("", fmt.Sprintf(`resource "sless_function" "f" {
  name       = %[1]q
  runtime    = "python3.12"
  entrypoint = "main.handler"
  source_dir = %[2]q
%[5]s
}

resource "sless_trigger" "t" {
  name     = %[3]q
  function = sless_function.f.name
  type     = "cron"
  schedule = "@yearly"
%[5]s
}

resource "sless_job" "j" {
  name     = %[4]q
  function = sless_function.f.name
  run_id   = 0
%[5]s
}
`, fn, dir, trig, job, nsLine))
	}
	addrs := []string{"sless_function.f", "sless_trigger.t", "sless_job.j"}
	inNamespace := func(ns string) []statecheck.StateCheck {
		var checks []statecheck.StateCheck
		for _, a := range addrs {
			checks = append(checks, statecheck.ExpectKnownValue(a, tfjsonpath.New("namespace"), knownvalue.StringExact(ns)))
		}
		return checks
	}
	var replaced []plancheck.PlanCheck
	for _, a := range addrs {
		replaced = append(replaced, plancheck.ExpectResourceAction(a, plancheck.ResourceActionDestroyBeforeCreate))
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories(),
		CheckDestroy:             functionGone(api, api.Namespace, fn),
		Steps: []resource.TestStep{
			{Config: cfg(fmt.Sprintf("  namespace = %q", other)), ConfigStateChecks: inNamespace(other)},
			{
				Config:            cfg(""),
				ConfigPlanChecks:  resource.ConfigPlanChecks{PreApply: replaced},
				ConfigStateChecks: inNamespace(api.Namespace),
				Check: func(*terraform.State) error {
					ctx := context.Background()
					if _, err := api.Client.GetFunction(ctx, other, fn); !client.IsNotFound(err) {
						return fmt.Errorf("function still in %s: %v", other, err)
					}
					if _, err := api.Client.GetTrigger(ctx, other, trig); !client.IsNotFound(err) {
						return fmt.Errorf("trigger still in %s: %v", other, err)
					}
					return nil
				},
			},
		},
	})
}
