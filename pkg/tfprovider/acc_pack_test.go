package tfprovider

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/sless-dev/sless/pkg/source"
	"github.com/sless-dev/sless/pkg/source/sourcetest"
)

// One directory (ignored litter, a .slessignore, a link, an executable)
// deployed by each tool that packs a directory reaches the API as the same
// bytes: before, the CLI and the provider packed by different rules.
func TestAccEveryToolUploadsTheSameBytes(t *testing.T) {
	api := startAPI(t)
	dir := sourcetest.Tree(t)
	want, err := source.PackDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	for _, pkg := range []string{"./cmd/sless", "./hack/devdeploy"} {
		build := exec.Command("go", "build", "-o", bin, pkg)
		build.Dir = repoRoot()
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, out)
		}
	}
	suffix := fmt.Sprint(time.Now().UnixNano() % 100000)
	for i, tc := range []struct {
		tool   string
		deploy func(t *testing.T, name string) []byte
	}{
		{"terraform apply with source_dir", func(t *testing.T, name string) []byte {
			var got []byte
			resource.Test(t, resource.TestCase{
				ProtoV6ProviderFactories: providerFactories(),
				CheckDestroy:             functionGone(api, api.Namespace, name),
				Steps: []resource.TestStep{{
					Config: hcl("", fmt.Sprintf(`resource "sless_function" "packed" {
  name       = %q
  runtime    = "python3.12"
  entrypoint = "main.handler"
  source_dir = %q
}
`, name, dir)),
					Check: func(*terraform.State) error {
						got, err = api.Client.GetSource(context.Background(), api.Namespace, name)
						return err
					},
				}},
			})
			return got
		}},
		{"sless deploy", func(t *testing.T, name string) []byte {
			cmd := exec.Command(filepath.Join(bin, "sless"), "deploy", dir, "--name", name, "-n", api.Namespace,
				"--runtime", "python3.12", "--entrypoint", "main.handler")
			cmd.Env = append(os.Environ(), "SLESS_CONFIG="+filepath.Join(t.TempDir(), "config"),
				"SLESS_SERVER="+api.Endpoint, "SLESS_TOKEN="+api.Token, "SLESS_NAMESPACE=")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("sless deploy: %v\n%s", err, out)
			}
			return getSource(t, api, name)
		}},
		{"devdeploy -dir (sless dev's example deploy)", func(t *testing.T, name string) []byte {
			tmp := t.TempDir()
			manifest, tokenFile := filepath.Join(tmp, "function.yaml"), filepath.Join(tmp, "token")
			writeFile(t, manifest, []byte(fmt.Sprintf("apiVersion: sless.dev/v1alpha1\nkind: Function\nmetadata:\n  name: %s\n"+
				"spec:\n  runtime: python3.12\n  entrypoint: main.handler\n", name)))
			writeFile(t, tokenFile, []byte(api.Token))
			cmd := exec.Command(filepath.Join(bin, "devdeploy"), "-url", api.Endpoint, "-token-file", tokenFile,
				"-namespace", api.Namespace, "-f", manifest, "-dir", dir)
			// It waits for Ready and calls the function: main.py imports the
			// linked util.py, so the answer proves the copy works.
			out, err := cmd.CombinedOutput()
			if _, answer, ok := bytes.Cut(out, []byte("\nGET ")); err != nil || !ok || !bytes.Contains(answer, []byte("packed")) {
				t.Fatalf("devdeploy: %v\n%s", err, out)
			}
			return getSource(t, api, name)
		}},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			got := tc.deploy(t, fmt.Sprintf("pack-%s-%d", suffix, i))
			if !bytes.Equal(got, want.Zip) {
				t.Fatalf("%s uploaded %d bytes that differ from source.PackDir's %d (sha256 %s)", tc.tool, len(got), len(want.Zip), want.SHA256)
			}
		})
	}
}

func getSource(t *testing.T, api *accAPI, name string) []byte {
	t.Helper()
	ctx := context.Background()
	b, err := api.Client.GetSource(ctx, api.Namespace, name)
	if err != nil {
		t.Fatalf("reading %s's source: %v", name, err)
	}
	t.Cleanup(func() { _ = api.Client.DeleteFunction(ctx, api.Namespace, name) })
	return b
}
