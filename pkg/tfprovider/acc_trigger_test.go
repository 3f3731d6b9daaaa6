package tfprovider

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
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
