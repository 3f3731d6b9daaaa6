package tfprovider

import (
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/config"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
)

// unknownProviderConfig is a configuration whose provider setting attr
// comes from a terraform_data resource that var.gen replaces, so it is
// unknown in the plan of every apply that changes var.gen.
func unknownProviderConfig(attr, value, body string) string {
	return fmt.Sprintf(`terraform {
  required_providers {
    sless = { source = %q }
  }
}

variable "gen" {
  type = number
}

resource "terraform_data" "setting" {
  input            = %q
  triggers_replace = [var.gen]
}

provider "sless" {
  %s = terraform_data.setting.output
}

%s`, providerSource, value, attr, body)
}

// A provider namespace known only after apply: objects in state are read
// with their own namespace, a new one gets the namespace at apply, a data
// source that names its namespace is read, and nothing panics.
func TestAccProviderNamespaceKnownAfterApply(t *testing.T) {
	api := startAPI(t)
	name := "tf-nsunk-" + fmt.Sprint(time.Now().UnixNano()%100000)
	body := fmt.Sprintf(`resource "sless_trigger" "t" {
  name     = %q
  function = "somewhere"
  type     = "cron"
  schedule = "@yearly"
}

data "sless_functions" "named" {
  namespace = %q
}
`, name, api.Namespace)
	cfg := unknownProviderConfig("namespace", api.Namespace, body)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories(),
		Steps: []resource.TestStep{
			{
				Config:          cfg,
				ConfigVariables: config.Variables{"gen": config.IntegerVariable(1)},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("sless_trigger.t", tfjsonpath.New("id"), knownvalue.StringExact(api.Namespace+"/"+name)),
				},
			},
			{
				// The namespace is unknown again: the trigger is refreshed
				// and kept, not replaced.
				Config:          cfg,
				ConfigVariables: config.Variables{"gen": config.IntegerVariable(2)},
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("sless_trigger.t", plancheck.ResourceActionNoop),
					plancheck.ExpectResourceAction("terraform_data.setting", plancheck.ResourceActionReplace),
				}},
			},
			{
				// A data source that needs the provider's namespace says
				// it is not known yet.
				Config: cfg + `
data "sless_functions" "provider_namespace" {}
`,
				ConfigVariables: config.Variables{"gen": config.IntegerVariable(3)},
				ExpectError:     regexp.MustCompile(`(?s)provider's namespace depends on values known only after apply`),
			},
		},
	})
}

// A provider endpoint known only after apply: objects in state keep their
// last known state with a warning, new ones are created at apply, and a
// data source says why it cannot be read; nothing panics.
func TestAccProviderEndpointKnownAfterApply(t *testing.T) {
	api := startAPI(t)
	name := "tf-epunk-" + fmt.Sprint(time.Now().UnixNano()%100000)
	body := fmt.Sprintf(`resource "sless_trigger" "t" {
  name     = %q
  function = "somewhere"
  type     = "cron"
  schedule = "@yearly"
}
`, name)
	cfg := unknownProviderConfig("endpoint", api.Endpoint, body)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories(),
		Steps: []resource.TestStep{
			{
				Config:          cfg,
				ConfigVariables: config.Variables{"gen": config.IntegerVariable(1)},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("sless_trigger.t", tfjsonpath.New("id"), knownvalue.StringExact(api.Namespace+"/"+name)),
				},
			},
			{
				Config:          cfg,
				ConfigVariables: config.Variables{"gen": config.IntegerVariable(2)},
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("sless_trigger.t", plancheck.ResourceActionNoop),
				}},
			},
			{
				Config: cfg + `
data "sless_functions" "all" {
  namespace = "anything"
}
`,
				ConfigVariables: config.Variables{"gen": config.IntegerVariable(3)},
				ExpectError:     regexp.MustCompile(`(?s)The sless provider is not configured.*endpoint or token depends on values known only after apply`),
			},
		},
	})
}
