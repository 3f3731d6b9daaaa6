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

// Only an http trigger has a URL: turning a cron trigger off or on, or
// pointing it at another function, plans its url as null (what the apply
// leaves), not "known after apply".
func TestAccCronTriggerPlansNoURL(t *testing.T) {
	api := startAPI(t)
	name := "tf-cronurl-" + fmt.Sprint(time.Now().UnixNano()%100000)
	addr := "sless_trigger.cron"
	cfg := func(enabled bool, function string) string {
		return hcl("", fmt.Sprintf(`resource "sless_trigger" "cron" {
  name     = %q
  function = %q
  type     = "cron"
  schedule = "@yearly"
  enabled  = %t
}
`, name, function, enabled))
	}
	noURL := []plancheck.PlanCheck{
		plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate),
		plancheck.ExpectKnownValue(addr, tfjsonpath.New("url"), knownvalue.Null()),
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories(),
		CheckDestroy: func(*terraform.State) error {
			if _, err := api.Client.GetTrigger(context.Background(), api.Namespace, name); !client.IsNotFound(err) {
				return fmt.Errorf("trigger after destroy: %v", err)
			}
			return nil
		},
		Steps: []resource.TestStep{
			{Config: cfg(true, "somewhere")},
			{Config: cfg(false, "somewhere"), ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: noURL}},
			{Config: cfg(true, "elsewhere"), ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: noURL}},
		},
	})
}

// An http trigger whose function does not exist gets no URL; the apply
// learns that from the trigger's Ready condition and ends, rather than
// waiting out its 30 s for a URL that cannot come.
func TestAccHTTPTriggerOfMissingFunctionDoesNotWait(t *testing.T) {
	startAPI(t)
	name := "tf-nofn-" + fmt.Sprint(time.Now().UnixNano()%100000)
	addr := "sless_trigger.http"
	var started time.Time
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories(),
		Steps: []resource.TestStep{{
			PreConfig: func() { started = time.Now() },
			Config: hcl("", fmt.Sprintf(`resource "sless_trigger" "http" {
  name     = %q
  function = "not-there"
  type     = "http"
}
`, name)),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(addr, tfjsonpath.New("url"), knownvalue.Null()),
			},
			Check: func(*terraform.State) error {
				// The plan and apply themselves take a few seconds under
				// Terraform; the wait for a URL alone took 30.
				if d := time.Since(started); d > 25*time.Second {
					return fmt.Errorf("apply took %s: it waited for a URL a trigger of a missing function never gets", d.Round(time.Second))
				}
				return nil
			},
		}},
	})
}
