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
	apiresource "k8s.io/apimachinery/pkg/api/resource"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
)

// A function made outside Terraform and imported: the first plan shows
// only what the configuration alone holds (source_dir, wait_timeout) and
// the configuration's spelling of the same CPU quantity, no new code and no
// new revision, and applying it leaves the function as it was: same
// generation, same revision (docs/terraform.md, Import).
func TestAccImportThenApplyChangesNothing(t *testing.T) {
	api := startAPI(t)
	dir := t.TempDir()
	setTree(t, dir, pyHello("imported"))
	name := "tf-imp-" + fmt.Sprint(time.Now().UnixNano()%100000)
	addr := "sless_function.imported"
	config := hcl("", fmt.Sprintf(`resource "sless_function" "imported" {
  name         = %q
  runtime      = "python3.12"
  entrypoint   = "main.handler"
  source_dir   = %q
  cpu          = "0.25"
  wait_timeout = "3m"
}
`, name, dir))
	var before *slessv1alpha1.Function
	create := func() {
		ctx := context.Background()
		a, err := zipDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		up, err := api.Client.PutSource(ctx, api.Namespace, name, a.Zip)
		if err != nil {
			t.Fatalf("upload: %v", err)
		}
		cpu := apiresource.MustParse("250m")
		fn := functionObject(api.Namespace, name, slessv1alpha1.FunctionSpec{
			WorkloadSpec: slessv1alpha1.WorkloadSpec{
				Runtime:    "python3.12",
				Entrypoint: "main.handler",
				CPU:        &cpu,
				Source:     slessv1alpha1.FunctionSource{Archive: &up.Archive},
			},
		})
		if _, err := api.Client.CreateFunction(ctx, fn); err != nil {
			t.Fatalf("create: %v", err)
		}
		for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
			got, err := api.Client.GetFunction(ctx, api.Namespace, name)
			if err == nil && got.Status.ObservedGeneration == got.Generation && got.IsReady() {
				before = got
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("function not ready: %v %+v", err, got)
			}
		}
	}
	unchanged := func(*terraform.State) error {
		after, err := api.Client.GetFunction(context.Background(), api.Namespace, name)
		if err != nil {
			return err
		}
		if after.Generation != before.Generation || after.Status.LatestReadyRevision != before.Status.LatestReadyRevision {
			return fmt.Errorf("the apply after import changed the function: generation %d -> %d, revision %s -> %s",
				before.Generation, after.Generation, before.Status.LatestReadyRevision, after.Status.LatestReadyRevision)
		}
		return nil
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories(),
		CheckDestroy:             functionGone(api, api.Namespace, name),
		Steps: []resource.TestStep{
			{
				PreConfig:          create,
				Config:             config,
				ResourceName:       addr,
				ImportState:        true,
				ImportStateId:      api.Namespace + "/" + name,
				ImportStatePersist: true,
			},
			{
				Config: config,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue(addr, tfjsonpath.New("source_dir"), knownvalue.StringExact(dir)),
					plancheck.ExpectKnownValue(addr, tfjsonpath.New("wait_timeout"), knownvalue.StringExact("3m")),
					plancheck.ExpectKnownValue(addr, tfjsonpath.New("cpu"), knownvalue.StringExact("0.25")),
					plancheck.ExpectKnownValue(addr, tfjsonpath.New("revision"), knownvalue.NotNull()),
					plancheck.ExpectKnownValue(addr, tfjsonpath.New("resolved_image"), knownvalue.NotNull()),
				}},
				Check: unchanged,
			},
		},
	})
}
