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
)

// volumes on sless_function: a Secret as files and a sized emptyDir apply
// against sless dev, the function reads the Secret's file, the plan after
// is empty although the server spells the size otherwise, and removing
// the attribute removes the volumes from the server.
func TestAccVolumes(t *testing.T) {
	api := startAPI(t)
	suffix := fmt.Sprint(time.Now().UnixNano() % 100000)
	secret, fnName := "tf-vol-"+suffix, "tf-vol-"+suffix
	if _, err := api.Client.CreateSecret(context.Background(), api.Namespace, secret, map[string][]byte{"token": []byte("t0ken")}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = api.Client.DeleteSecret(context.Background(), api.Namespace, secret) })
	dir := t.TempDir()
	setTree(t, dir, map[string]string{"main.py": `def handler(event, context):
    return {"token": open("/etc/tf-vol/token").read()}
`})
	fn := "sless_function.vol"
	cfg := func(attrs string) string {
		return hcl("", fmt.Sprintf(`resource "sless_function" "vol" {
  name         = %q
  runtime      = "python3.12"
  entrypoint   = "main.handler"
  source_dir   = %q
  wait_timeout = "3m"
%s}
`, fnName, dir, attrs))
	}
	withVolumes := cfg(fmt.Sprintf(`  volumes = [
    { name = "creds", mount_path = "/etc/tf-vol", secret = { name = %q, default_mode = 288 } },
    { name = "scratch", mount_path = "/scratch", empty_dir = { size_limit = "0.0625Gi" } },
  ]
`, secret))
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories(),
		CheckDestroy:             functionGone(api, api.Namespace, fnName),
		Steps: []resource.TestStep{
			{
				Config: withVolumes,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(fn, tfjsonpath.New("phase"), knownvalue.StringExact("Ready")),
					// The user's spelling stays: the server says 64Mi.
					statecheck.ExpectKnownValue(fn, tfjsonpath.New("volumes").AtSliceIndex(1).AtMapKey("empty_dir").AtMapKey("size_limit"), knownvalue.StringExact("0.0625Gi")),
					statecheck.ExpectKnownValue(fn, tfjsonpath.New("volumes").AtSliceIndex(0).AtMapKey("secret").AtMapKey("default_mode"), knownvalue.Int64Exact(288)),
				},
				Check: func(st *terraform.State) error {
					f, err := api.Client.GetFunction(context.Background(), api.Namespace, fnName)
					if err != nil {
						return err
					}
					v := f.Spec.Volumes
					if len(v) != 2 || v[0].Secret == nil || v[0].Secret.SecretName != secret || v[1].EmptyDir == nil || v[1].EmptyDir.SizeLimit.String() != "64Mi" {
						return fmt.Errorf("volumes on the server: %+v", v)
					}
					got, err := invoke(st.RootModule().Resources[fn].Primary.Attributes["url"], api.Token)
					if err != nil {
						return err
					}
					if got["token"] != "t0ken" {
						return fmt.Errorf("the function read %v from its Secret's file, want t0ken", got)
					}
					return nil
				},
			},
			{
				Config: cfg(""),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(fn, plancheck.ResourceActionUpdate),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(fn, tfjsonpath.New("volumes"), knownvalue.Null()),
				},
				Check: func(*terraform.State) error {
					f, err := api.Client.GetFunction(context.Background(), api.Namespace, fnName)
					if err != nil {
						return err
					}
					if len(f.Spec.Volumes) != 0 {
						return fmt.Errorf("volumes left on the server: %+v", f.Spec.Volumes)
					}
					return nil
				},
			},
		},
	})
}
