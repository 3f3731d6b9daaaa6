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
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// A payload is stored as configured, JSON nulls included, by a create and
// by an update alike, and the next plan is empty. (Updates were JSON merge
// patches, in which a null member means "remove": {"a": null} lost "a", and
// the apply failed with "Provider produced inconsistent result".)
func TestAccPayloadNullsRoundTrip(t *testing.T) {
	api := startAPI(t)
	suffix := fmt.Sprint(time.Now().UnixNano() % 100000)
	trigger, job := "tf-pnullc-"+suffix, "tf-pnullj-"+suffix
	cfg := func(payload string) string {
		return hcl("", fmt.Sprintf(`resource "sless_trigger" "cron" {
  name     = %q
  function = "not-there"
  type     = "cron"
  schedule = "@yearly"
  payload  = %s
}

resource "sless_job" "j" {
  name     = %q
  function = "not-there"
  run_id   = 0
  payload  = %s
}
`, trigger, payload, job, payload))
	}
	// stored checks what the API holds, not only what the state says.
	stored := func(want string) resource.TestCheckFunc {
		return func(*terraform.State) error {
			ctx := context.Background()
			tr, err := api.Client.GetTrigger(ctx, api.Namespace, trigger)
			if err != nil {
				return err
			}
			j, err := api.Client.GetJob(ctx, api.Namespace, job)
			if err != nil {
				return err
			}
			for what, got := range map[string]*apiextensionsv1.JSON{"trigger": tr.Spec.Payload, "job": j.Spec.Payload} {
				if got == nil || !sameJSON(got.Raw, []byte(want)) {
					return fmt.Errorf("the API holds the %s's payload as %s, want %s", what, got, want)
				}
			}
			return nil
		}
	}
	step := func(hclPayload, want string, action plancheck.ResourceActionType) resource.TestStep {
		return resource.TestStep{
			Config: cfg(hclPayload),
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectResourceAction("sless_trigger.cron", action),
				plancheck.ExpectResourceAction("sless_job.j", action),
			}},
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("sless_trigger.cron", tfjsonpath.New("payload"), knownvalue.StringExact(want)),
				statecheck.ExpectKnownValue("sless_job.j", tfjsonpath.New("payload"), knownvalue.StringExact(want)),
			},
			Check: stored(want),
		}
	}
	// Labels set outside Terraform stay: an update replaces the spec only.
	labelled := step(`jsonencode({ a = 1, c = { d = 2 } })`, `{"a":1,"c":{"d":2}}`, plancheck.ResourceActionUpdate)
	labelled.PreConfig = func() {
		label := map[string]any{"metadata": map[string]any{"labels": map[string]string{"team": "a"}}}
		if _, err := api.Client.PatchTrigger(context.Background(), api.Namespace, trigger, label); err != nil {
			t.Fatal(err)
		}
		if _, err := api.Client.PatchJob(context.Background(), api.Namespace, job, label); err != nil {
			t.Fatal(err)
		}
	}
	labelled.Check = resource.ComposeTestCheckFunc(labelled.Check, func(*terraform.State) error {
		tr, err := api.Client.GetTrigger(context.Background(), api.Namespace, trigger)
		if err != nil {
			return err
		}
		j, err := api.Client.GetJob(context.Background(), api.Namespace, job)
		if err != nil {
			return err
		}
		if tr.Labels["team"] != "a" || j.Labels["team"] != "a" {
			return fmt.Errorf("labels after the update: trigger %v, job %v; want team=a kept", tr.Labels, j.Labels)
		}
		return nil
	})
	withNulls := `jsonencode({ a = null, b = [null], c = { d = null, e = 1 } })`
	withNullsJSON := `{"a":null,"b":[null],"c":{"d":null,"e":1}}`
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories(),
		Steps: []resource.TestStep{
			step(withNulls, withNullsJSON, plancheck.ResourceActionCreate),
			labelled,
			step(withNulls, withNullsJSON, plancheck.ResourceActionUpdate),
			step(`jsonencode({ b = [null] })`, `{"b":[null]}`, plancheck.ResourceActionUpdate),
			// Nothing but a null member left.
			step(`jsonencode({ a = null })`, `{"a":null}`, plancheck.ResourceActionUpdate),
		},
	})
}
