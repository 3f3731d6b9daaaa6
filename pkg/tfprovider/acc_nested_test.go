package tfprovider

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
)

// Settings removed from inside an object go from the server too: a scale
// bound, an async setting (back to its default), a queue's dead-letter queue and non-default numbers, members of a
// cron trigger's or a job's payload. (A JSON merge patch leaves out fields
// unchanged and merges objects member by member; the apply used to keep the
// old values and fail with "Provider produced inconsistent result".)
func TestAccRemovedNestedSettingsGo(t *testing.T) {
	api := startAPI(t)
	dir := t.TempDir()
	setTree(t, dir, pyHello("nested"))
	suffix := fmt.Sprint(time.Now().UnixNano() % 100000)
	cfg := func(full bool) string {
		async := `{ concurrency = 3 }`
		scale, queue, payload := `{ min = 1, max = 2 }`, `{ connection_secret = "amqp", queue = "orders" }`, `{ keep = 1, nested = { keep = 2 } }`
		if full {
			scale = `{ min = 1, max = 2, target = 5, container_concurrency = 3 }`
			async = `{ concurrency = 3, max_retries = 0, max_event_age_sec = 600, on_failure = "https://hooks.example.com/failed" }`
			queue = `{ connection_secret = "amqp", queue = "orders", prefetch = 50, max_retries = 7, dead_letter_queue = "orders-dead" }`
			payload = `{ keep = 1, drop = 2, nested = { keep = 2, drop = 3 } }`
		}
		return hcl("", fmt.Sprintf(`resource "sless_function" "f" {
  name       = "tf-nest-%[1]s"
  runtime    = "python3.12"
  entrypoint = "main.handler"
  source_dir = %[2]q
  scale      = %[3]s
  async      = %[6]s
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
`, suffix, dir, scale, queue, payload, async))
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories(),
		CheckDestroy:             functionGone(api, api.Namespace, "tf-nest-"+suffix),
		Steps: []resource.TestStep{
			{Config: cfg(true), Check: serverAsync(api, "tf-nest-"+suffix, "3/0/600 onFailure https://hooks.example.com/failed")},
			{
				// The refresh after the apply reads the server: these hold
				// only if the server dropped what the configuration dropped.
				Config: cfg(false),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("sless_function.f", tfjsonpath.New("scale").AtMapKey("target"), knownvalue.Null()),
					statecheck.ExpectKnownValue("sless_function.f", tfjsonpath.New("scale").AtMapKey("container_concurrency"), knownvalue.Null()),
					statecheck.ExpectKnownValue("sless_function.f", tfjsonpath.New("async").AtMapKey("max_retries"), knownvalue.Int64Exact(2)),
					statecheck.ExpectKnownValue("sless_function.f", tfjsonpath.New("async").AtMapKey("max_event_age_sec"), knownvalue.Int64Exact(21600)),
					statecheck.ExpectKnownValue("sless_function.f", tfjsonpath.New("async").AtMapKey("on_failure"), knownvalue.Null()),
					statecheck.ExpectKnownValue("sless_trigger.queue", tfjsonpath.New("queue").AtMapKey("dead_letter_queue"), knownvalue.Null()),
					statecheck.ExpectKnownValue("sless_trigger.queue", tfjsonpath.New("queue").AtMapKey("prefetch"), knownvalue.Int64Exact(10)),
					statecheck.ExpectKnownValue("sless_trigger.cron", tfjsonpath.New("payload"), knownvalue.StringExact(`{"keep":1,"nested":{"keep":2}}`)),
					statecheck.ExpectKnownValue("sless_job.j", tfjsonpath.New("payload"), knownvalue.StringExact(`{"keep":1,"nested":{"keep":2}}`)),
				},
				Check: serverAsync(api, "tf-nest-"+suffix, "3/2/21600"),
			},
		},
	})
}

// serverAsync checks the server's spec.async of a function as
// concurrency/maxRetries/maxEventAgeSeconds.
func serverAsync(api *accAPI, name, want string) resource.TestCheckFunc {
	show := func(p *int32) string {
		if p == nil {
			return "unset"
		}
		return fmt.Sprint(*p)
	}
	return func(*terraform.State) error {
		fn, err := api.Client.GetFunction(context.Background(), api.Namespace, name)
		if err != nil {
			return err
		}
		got := "none"
		if a := fn.Spec.Async; a != nil {
			got = show(a.Concurrency) + "/" + show(a.MaxRetries) + "/" + show(a.MaxEventAgeSeconds)
			if a.OnFailure != "" {
				got += " onFailure " + a.OnFailure
			}
		}
		if got != want {
			return fmt.Errorf("server's spec.async = %s, want %s", got, want)
		}
		return nil
	}
}
