package v1alpha1_test

import (
	"os"
	"path/filepath"
	"sort"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/sless-dev/sless/test/testbed"
)

// TestEveryFieldExplained holds the CRDs to what `kubectl explain` shows: a
// description on every field of spec and status, down to the leaves, so
// that no field reads "<no description>".
func TestEveryFieldExplained(t *testing.T) {
	root, err := testbed.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(root, "config", "crd", "*.yaml"))
	if err != nil || len(files) != 5 {
		t.Fatalf("want the five CRDs in config/crd, found %v (%v)", files, err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(b, crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, v := range crd.Spec.Versions {
			schema := v.Schema.OpenAPIV3Schema
			var missing []string
			for _, top := range []string{"spec", "status"} {
				p, ok := schema.Properties[top]
				if !ok {
					t.Errorf("%s %s has no %s", crd.Name, v.Name, top)
					continue
				}
				missing = append(missing, undescribed(top, p)...)
			}
			sort.Strings(missing)
			for _, m := range missing {
				t.Errorf("%s %s: %s has no description (kubectl explain shows <no description>)", crd.Spec.Names.Kind, v.Name, m)
			}
		}
	}
}

func undescribed(path string, s apiextensionsv1.JSONSchemaProps) []string {
	var out []string
	if s.Description == "" {
		out = append(out, path)
	}
	for name, p := range s.Properties {
		out = append(out, undescribed(path+"."+name, p)...)
	}
	if s.Items != nil && s.Items.Schema != nil {
		for name, p := range s.Items.Schema.Properties {
			out = append(out, undescribed(path+"[]."+name, p)...)
		}
	}
	return out
}
