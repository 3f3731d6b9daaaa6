package tfprovider

import (
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
)

// Settings removed from inside an object go from the server too: a scale
// bound, a queue's dead-letter queue and non-default numbers, members of a
// cron trigger's or a job's payload. (A JSON merge patch leaves out fields
// unchanged and merges objects member by member; the apply used to keep the
// old values and fail with "Provider produced inconsistent result".)
func TestAccRemovedNestedSettingsGo(t *testing.T) {
	api := startAPI(t)
	dir := t.TempDir()
	setTree(t, dir, pyHello("nested"))
	suffix := fmt.Sprint(time.Now().UnixNano() % 100000)
	cfg := func(full bool) string {
		scale, queue, payload := `{ min = 1, max = 2 }`, `{ connection_secret = "amqp", queue = "orders" }`, `{ keep = 1, nested = { keep = 2 } }`
		if full {
			scale = `{ min = 1, max = 2, target = 5, container_concurrency = 3 }`
			queue = `{ connection_secret = "amqp", queue = "orders", prefetch = 50, max_retries = 7, dead_letter_queue = "orders-dead" }`
			payload = `{ keep = 1, drop = 2, nested = { keep = 2, drop = 3 } }`
		}
		return hcl("", fmt.Sprintf(`resource "sless_function" "f" {
  name       = "tf-nest-%[1]s"
  runtime    = "python3.12"
  entrypoint = "main.handler"
  source_dir = %[2]q
  scale      = %[3]s
}

resource "sless_trigger" "queue" {
  name     = "tf-nestq-%[1]s"
  function = sless_function.f.name
  type     = "queue"
  queue    = %[4]s
}

resource "sless_trigger" "cron" {
  name     = "tf-nestc-%[1]s"
  function = sless_function.f.name
  type     = "cron"
  schedule = "@yearly"
  payload  = jsonencode(%[5]s)
}

resource "sless_job" "j" {
  name     = "tf-nestj-%[1]s"
  function = sless_function.f.name
  run_id   = 0
  payload  = jsonencode(%[5]s)
}
`, suffix, dir, scale, queue, payload))
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories(),
		CheckDestroy:             functionGone(api, api.Namespace, "tf-nest-"+suffix),
		Steps: []resource.TestStep{
			{Config: cfg(true)},
			{
				// The refresh after the apply reads the server: these hold
				// only if the server dropped what the configuration dropped.
				Config: cfg(false),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("sless_function.f", tfjsonpath.New("scale").AtMapKey("target"), knownvalue.Null()),
					statecheck.ExpectKnownValue("sless_function.f", tfjsonpath.New("scale").AtMapKey("container_concurrency"), knownvalue.Null()),
					statecheck.ExpectKnownValue("sless_trigger.queue", tfjsonpath.New("queue").AtMapKey("dead_letter_queue"), knownvalue.Null()),
					statecheck.ExpectKnownValue("sless_trigger.queue", tfjsonpath.New("queue").AtMapKey("prefetch"), knownvalue.Int64Exact(10)),
					statecheck.ExpectKnownValue("sless_trigger.cron", tfjsonpath.New("payload"), knownvalue.StringExact(`{"keep":1,"nested":{"keep":2}}`)),
					statecheck.ExpectKnownValue("sless_job.j", tfjsonpath.New("payload"), knownvalue.StringExact(`{"keep":1,"nested":{"keep":2}}`)),
				},
			},
		},
	})
}
