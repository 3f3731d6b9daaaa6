package testbed

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"
)

// TestKnativeDataPlaneManifests: every document the node applies of
// Knative's release parses, names no ko:// image once rewritten, and runs
// the activator and the autoscaler on the node's images under the accounts
// the release makes.
func TestKnativeDataPlaneManifests(t *testing.T) {
	images := &NodeImages{Registry: "10.201.0.1:5000", Programs: map[string]string{}}
	for _, name := range KnativePrograms {
		images.Programs[name] = "10.201.0.1:5000/knative/" + name + "@sha256:" + strings.Repeat("a", 64)
	}
	var kinds, accounts []string
	deployments := map[string]appsv1.Deployment{}
	err := manifests(knativeDataPlane, func(file string, doc []byte) error {
		doc, err := images.RewriteRelease(doc)
		if err != nil {
			return err
		}
		if strings.Contains(string(doc), "ko://") {
			t.Errorf("%s: a ko:// reference is left", file)
		}
		var meta struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			return err
		}
		kinds = append(kinds, meta.Kind)
		switch meta.Kind {
		case "ServiceAccount":
			accounts = append(accounts, meta.Metadata.Name)
		case "Deployment":
			var d appsv1.Deployment
			if err := yaml.Unmarshal(doc, &d); err != nil {
				return err
			}
			deployments[d.Name] = d
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"activator", "autoscaler"} {
		d, ok := deployments[name]
		if !ok {
			t.Fatalf("no Deployment %s among %v", name, kinds)
		}
		if img := d.Spec.Template.Spec.Containers[0].Image; img != images.Programs[name] {
			t.Errorf("%s runs %s, want %s", name, img, images.Programs[name])
		}
		if sa := d.Spec.Template.Spec.ServiceAccountName; !slices.Contains(accounts, sa) {
			t.Errorf("%s runs as ServiceAccount %s, which the manifests do not make (%v)", name, sa, accounts)
		}
	}
	for _, kind := range []string{"Service", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"} {
		if !slices.Contains(kinds, kind) {
			t.Errorf("no %s among %v", kind, kinds)
		}
	}
}
