package tfprovider

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/compare"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
)

// A traffic block steers calls among a function's revisions with honest
// plans: a split, then a change of weights, each planned as an update that
// builds nothing and keeps the serving revision known; after each apply
// the plan is empty (terraform-plugin-testing plans again and fails on any
// change), though latest and percent were left out and latest resolves to
// a revision name on the server; import reads the same list back; and
// removing the block gives every call back to the latest revision. The
// data source reads the same list.
func TestAccTrafficSplit(t *testing.T) {
	api := startAPI(t)
	dir := t.TempDir()
	setTree(t, dir, pyHello("traffic"))
	name := "tf-traffic-" + fmt.Sprint(time.Now().UnixNano()%100000)
	addr := "sless_function.f"
	first, second := name+"-00001", name+"-00002"
	cfg := func(greeting, traffic string) string {
		return hcl("", fmt.Sprintf(`resource "sless_function" "f" {
  name       = %q
  runtime    = "python3.12"
  entrypoint = "main.handler"
  source_dir = %q
  env        = { GREETING = %q }
%s
}

data "sless_function" "f" {
  name       = sless_function.f.name
  depends_on = [sless_function.f]
}
`, name, dir, greeting, traffic))
	}
	split := func(old, latest int) string {
		return fmt.Sprintf(`  traffic = [
    { revision = %q, percent = %d, tag = "old" },
    { percent = %d },
  ]`, first, old, latest)
	}
	at := func(i int, attr string) tfjsonpath.Path {
		return tfjsonpath.New("traffic").AtSliceIndex(i).AtMapKey(attr)
	}
	keepsRevision := []plancheck.PlanCheck{
		plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate),
		plancheck.ExpectKnownValue(addr, tfjsonpath.New("revision"), knownvalue.StringExact(second)),
		plancheck.ExpectKnownValue(addr, tfjsonpath.New("resolved_image"), knownvalue.NotNull()),
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories(),
		CheckDestroy:             functionGone(api, api.Namespace, name),
		Steps: []resource.TestStep{
			{
				Config: cfg("a", ""),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("revision"), knownvalue.StringExact(first)),
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("traffic"), knownvalue.Null()),
				},
			},
			{
				Config: cfg("b", ""),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("revision"), knownvalue.StringExact(second)),
				},
			},
			{
				Config: cfg("b", split(50, 50)),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: append(keepsRevision,
					plancheck.ExpectKnownValue(addr, at(0, "latest"), knownvalue.Bool(false)),
					plancheck.ExpectKnownValue(addr, at(1, "latest"), knownvalue.Bool(true)),
					plancheck.ExpectKnownValue(addr, at(1, "tag"), knownvalue.Null()),
				)},
				Check: serverTraffic(api, name, first+" 50 old, latest 50", first+" 50 old, "+second+" 50"),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.CompareValuePairs("data.sless_function.f", tfjsonpath.New("traffic"), addr, tfjsonpath.New("traffic"), compare.ValuesSame()),
				},
			},
			{
				Config: cfg("b", split(10, 90)),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: append(keepsRevision,
					plancheck.ExpectKnownValue(addr, at(0, "percent"), knownvalue.Int64Exact(10)),
					plancheck.ExpectKnownValue(addr, at(1, "percent"), knownvalue.Int64Exact(90)),
				)},
				Check: serverTraffic(api, name, first+" 10 old, latest 90", first+" 10 old, "+second+" 90"),
			},
			{
				Config:                  cfg("b", split(10, 90)),
				ResourceName:            addr,
				ImportState:             true,
				ImportStateId:           api.Namespace + "/" + name,
				ImportStateVerify:       true,
				ImportStateVerifyIgnore: []string{"source_dir"},
			},
			{
				// Back to a pinned revision alone: the rollback, no build.
				Config:           cfg("b", fmt.Sprintf(`  traffic = [{ revision = %q, percent = 100 }]`, first)),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: keepsRevision},
				Check:            serverTraffic(api, name, first+" 100", first+" 100"),
			},
			{
				Config:           cfg("b", ""),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: keepsRevision},
				Check:            serverTraffic(api, name, "none", second+" 100"),
			},
		},
	})
}

// serverTraffic checks the server's spec.traffic and status.traffic of a
// function, each written as "revision percent [tag]" entries ("latest" for
// a spec entry that follows the latest revision; "none" for no entries).
func serverTraffic(api *accAPI, name, spec, status string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		fn, err := api.Client.GetFunction(context.Background(), api.Namespace, name)
		if err != nil {
			return err
		}
		show := func(rev string, pct int64, tag string) string {
			return strings.TrimSpace(fmt.Sprintf("%s %d %s", rev, pct, tag))
		}
		var gotSpec, gotStatus []string
		for _, t := range fn.Spec.Traffic {
			rev := t.RevisionName
			if t.IsLatest() {
				rev = "latest"
			}
			gotSpec = append(gotSpec, show(rev, t.PercentOf(), t.Tag))
		}
		for _, t := range fn.Status.Traffic {
			gotStatus = append(gotStatus, show(t.RevisionName, t.PercentOf(), t.Tag))
		}
		if len(gotSpec) == 0 {
			gotSpec = []string{"none"}
		}
		if g := strings.Join(gotSpec, ", "); g != spec {
			return fmt.Errorf("server's spec.traffic = %s, want %s", g, spec)
		}
		if g := strings.Join(gotStatus, ", "); g != status {
			return fmt.Errorf("server's status.traffic = %s, want %s", g, status)
		}
		return nil
	}
}
