package tfprovider

import (
	"context"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	"k8s.io/apimachinery/pkg/types"
)

// A job whose run cannot start says why when the apply's wait ends: the
// job's Ready condition (its function does not exist), not only its phase.
func TestAccJobWaitSaysWhyTheRunDidNotStart(t *testing.T) {
	startAPI(t)
	name := "tf-nofnj-" + fmt.Sprint(time.Now().UnixNano()%100000)
	cfg := func(runID int) string {
		return hcl("", fmt.Sprintf(`resource "sless_job" "j" {
  name         = %q
  function     = "not-there"
  run_id       = %d
  wait_timeout = "3s"
}
`, name, runID))
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories(),
		Steps: []resource.TestStep{
			{Config: cfg(0)},
			{
				Config:      cfg(1),
				ExpectError: regexp.MustCompile(`(?s)Job run not finished.*did not finish within 3s.*"Pending".*FunctionNotFound: Function not-there\s+does not exist.*waits for\s+run 1 again`),
			},
		},
	})
}

// A run still going when an apply's wait_timeout ends is not run again:
// the job stays in state untainted (a create that reported an error would
// be tainted, and the next apply would replace the job, running it a
// second time), and each later apply waits for that same run until it
// ends and reports how.
func TestAccJobWaitTimeoutDoesNotRunAgain(t *testing.T) {
	api := startAPI(t)
	dir := t.TempDir()
	setTree(t, dir, pyHello("later"))
	suffix := fmt.Sprint(time.Now().UnixNano() % 100000)
	fn, job := "tf-later-"+suffix, "tf-laterj-"+suffix
	addr := "sless_job.j"
	jobOnly := hcl("", fmt.Sprintf(`resource "sless_job" "j" {
  name         = %q
  function     = %q
  wait_timeout = "3s"
}
`, job, fn))
	withFunction := hcl("", fmt.Sprintf(`resource "sless_function" "f" {
  name       = %q
  runtime    = "python3.12"
  entrypoint = "main.handler"
  source_dir = %q
}

resource "sless_job" "j" {
  name         = %q
  function     = sless_function.f.name
  wait_timeout = "5m"
}
`, fn, dir, job))
	var uid types.UID
	sameJob := func(*terraform.State) error {
		j, err := api.Client.GetJob(context.Background(), api.Namespace, job)
		if err != nil {
			return err
		}
		if uid == "" {
			uid = j.UID
		}
		if j.UID != uid {
			return fmt.Errorf("job %s was made again (uid %s, first %s): its run would run twice", job, j.UID, uid)
		}
		return nil
	}
	waitsAgain := []plancheck.PlanCheck{
		plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate),
		plancheck.ExpectUnknownValue(addr, tfjsonpath.New("phase")),
		plancheck.ExpectUnknownValue(addr, tfjsonpath.New("output")),
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories(),
		CheckDestroy:             functionGone(api, api.Namespace, fn),
		Steps: []resource.TestStep{
			{
				// The function does not exist yet: the run waits for it past
				// wait_timeout. The apply warns and succeeds; the plan after
				// it waits for the run again.
				Config:             jobOnly,
				ExpectNonEmptyPlan: true,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("phase"), knownvalue.StringExact("Pending")),
				},
				Check: sameJob,
			},
			{
				// The next apply plans an update that waits for the same run,
				// not a replacement; at an update a wait that ends first is
				// an error (nothing is tainted by it).
				Config:           jobOnly,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: waitsAgain},
				ExpectError:      regexp.MustCompile(`(?s)Job run not finished.*did not finish within 3s.*waits for\s+run 1 again`),
			},
			{
				// The function comes: this apply sees the same run through.
				Config:           withFunction,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: waitsAgain},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("phase"), knownvalue.StringExact("Succeeded")),
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("output"), knownvalue.StringRegexp(regexp.MustCompile(`"greeting"`))),
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("run_id"), knownvalue.Int64Exact(1)),
				},
				Check: sameJob,
			},
		},
	})
}
