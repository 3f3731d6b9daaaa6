package tfprovider

import (
	"context"
	"fmt"
	"regexp"
	"strings"
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

func secretGone(api *accAPI, name string) func(*terraform.State) error {
	return func(*terraform.State) error {
		if _, err := api.Client.GetSecret(context.Background(), api.Namespace, name); !client.IsNotFound(err) {
			return fmt.Errorf("secret after destroy: %v", err)
		}
		return nil
	}
}

// sless_secret with data: apply, an empty plan, a rotation planned as an
// update, import (values cannot be read back), a rotation made outside
// Terraform planned as sending the configured values again, destroy.
func TestAccSecretLifecycle(t *testing.T) {
	api := startAPI(t)
	name := "tf-secret-" + fmt.Sprint(time.Now().UnixNano()%100000)
	addr := "sless_secret.db"
	cfg := func(password string) string {
		return hcl("", fmt.Sprintf(`resource "sless_secret" "db" {
  name = %q
  data = {
    password = %q
    user     = "app"
  }
}
`, name, password))
	}
	var firstVersion string
	version := func(into *string) resource.TestCheckFunc {
		return func(s *terraform.State) error {
			*into = s.RootModule().Resources[addr].Primary.Attributes["version"]
			got, err := api.Client.GetSecret(context.Background(), api.Namespace, name)
			if err != nil {
				return err
			}
			if got.Metadata.ResourceVersion != *into || strings.Join(got.Keys, ",") != "password,user" {
				return fmt.Errorf("the API has version %s keys %v, state version %s", got.Metadata.ResourceVersion, got.Keys, *into)
			}
			return nil
		}
	}
	var second string
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories(),
		CheckDestroy:             secretGone(api, name),
		Steps: []resource.TestStep{
			{
				Config: cfg("first-value"),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("keys"), knownvalue.ListExact([]knownvalue.Check{
						knownvalue.StringExact("password"), knownvalue.StringExact("user")})),
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("id"), knownvalue.StringExact(api.Namespace+"/"+name)),
				},
				Check: version(&firstVersion),
			},
			{
				Config: cfg("second-value"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate),
					plancheck.ExpectUnknownValue(addr, tfjsonpath.New("version")),
				}},
				Check: func(s *terraform.State) error {
					if err := version(&second)(s); err != nil {
						return err
					}
					if second == firstVersion {
						return fmt.Errorf("version %s did not change with the values", second)
					}
					return nil
				},
			},
			{
				ResourceName: addr, ImportState: true, ImportStateVerify: true,
				ImportStateId: api.Namespace + "/" + name,
				// The API never gives values back.
				ImportStateVerifyIgnore: []string{"data", "data.%", "data.password", "data.user"},
			},
			{
				// Rotated with the CLI meanwhile: the state's values are no
				// longer known to be the secret's, so the plan sends them.
				PreConfig: func() {
					if _, err := api.Client.RotateSecret(context.Background(), api.Namespace, name,
						map[string][]byte{"password": []byte("elsewhere"), "user": []byte("app")}, ""); err != nil {
						t.Fatal(err)
					}
				},
				Config: cfg("second-value"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate),
				}},
			},
		},
	})
}

// sless_secret with data_wo: the values are in neither state nor plan, a
// change of values alone plans nothing, a new data_wo_version sends them.
func TestAccSecretWriteOnly(t *testing.T) {
	api := startAPI(t)
	name := "tf-secret-wo-" + fmt.Sprint(time.Now().UnixNano()%100000)
	addr := "sless_secret.wo"
	cfg := func(value string, version int) string {
		return hcl("", fmt.Sprintf(`resource "sless_secret" "wo" {
  name            = %q
  data_wo         = { token = %q }
  data_wo_version = %d
}
`, name, value, version))
	}
	noValue := func(value string) resource.TestCheckFunc {
		return func(s *terraform.State) error {
			for k, v := range s.RootModule().Resources[addr].Primary.Attributes {
				if strings.Contains(v, value) {
					return fmt.Errorf("state attribute %s holds the value", k)
				}
			}
			return nil
		}
	}
	var v1 string
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories(),
		CheckDestroy:             secretGone(api, name),
		Steps: []resource.TestStep{
			{
				Config: cfg("wo-first-Xk2", 1),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("keys"), knownvalue.ListExact([]knownvalue.Check{knownvalue.StringExact("token")})),
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("data_wo"), knownvalue.Null()),
				},
				Check: resource.ComposeTestCheckFunc(noValue("wo-first-Xk2"), func(s *terraform.State) error {
					v1 = s.RootModule().Resources[addr].Primary.Attributes["version"]
					return nil
				}),
			},
			{
				// Values changed, version not: nothing to plan.
				Config:   cfg("wo-second-Pq7", 1),
				PlanOnly: true,
			},
			{
				Config: cfg("wo-second-Pq7", 2),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate),
				}},
				Check: resource.ComposeTestCheckFunc(noValue("wo-second-Pq7"), func(s *terraform.State) error {
					got, err := api.Client.GetSecret(context.Background(), api.Namespace, name)
					if err != nil {
						return err
					}
					if got.Metadata.ResourceVersion == v1 {
						return fmt.Errorf("data_wo_version 2 sent nothing: version still %s", v1)
					}
					return nil
				}),
			},
		},
	})
}

// Bad configurations are refused at plan, naming the attribute.
func TestAccSecretRefusesBadConfig(t *testing.T) {
	startAPI(t)
	for _, tc := range []struct{ body, want string }{
		{`name = "ok"`, "set data (kept in state, sensitive) or data_wo"},
		{`name = "ok"
  data = { a = "1" }
  data_wo = { a = "1" }`, "set data or data_wo, not both"},
		{`name = "Bad_Name"
  data = { a = "1" }`, "DNS-1123 subdomain"},
		{`name = "ok"
  data = { "a/b" = "1" }`, "data[a/b]"},
		{`name = "ok"
  data = {}`, "at least one key"},
		{`name = "ok"
  data = { a = "1" }
  data_wo_version = 2`, "data_wo_version goes with data_wo"},
	} {
		resource.Test(t, resource.TestCase{
			ProtoV6ProviderFactories: providerFactories(),
			Steps: []resource.TestStep{{
				Config:      hcl("", "resource \"sless_secret\" \"bad\" {\n  "+tc.body+"\n}\n"),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(strings.ReplaceAll(regexp.QuoteMeta(tc.want), " ", `\s+`)),
			}},
		})
	}
}
