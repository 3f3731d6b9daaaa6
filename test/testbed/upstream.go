package testbed

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// ThirdParty is the directory of a module's files in third_party/, where
// hack/third-party.sh copies them at the version go.mod selects.
func ThirdParty(module string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "third_party", filepath.FromSlash(module)), nil
}

// upstreamCRDs are the CustomResourceDefinitions a cluster running Knative
// Serving and Tekton Pipelines has, read from their release manifests in
// third_party/: the exact schemas the apiserver then enforces.
var upstreamCRDs = []releaseManifest{
	{"knative.dev/serving", "config/core/300-resources/*.yaml"},
	{"knative.dev/networking", "config/certificate.yaml"},
	{"knative.dev/networking", "config/ingress.yaml"},
	{"knative.dev/networking", "config/serverlessservice.yaml"},
	{"knative.dev/networking", "config/domain-claim.yaml"},
	{"knative.dev/caching", "config/image.yaml"},
	{"github.com/tektoncd/pipeline", "config/300-crds/*.yaml"},
}

// UpstreamCRDs reads the CustomResourceDefinitions of Knative Serving (with
// knative.dev/networking's and knative.dev/caching's) and Tekton Pipelines.
func UpstreamCRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	var crds []*apiextensionsv1.CustomResourceDefinition
	err := manifests(upstreamCRDs, func(file string, doc []byte) error {
		var head struct{ APIVersion, Kind string }
		if err := yaml.Unmarshal(doc, &head); err != nil {
			return fmt.Errorf("parse %s: %w", file, err)
		}
		if head.Kind != "CustomResourceDefinition" || head.APIVersion != apiextensionsv1.SchemeGroupVersion.String() {
			return nil
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(doc, crd); err != nil {
			return fmt.Errorf("parse CRD in %s: %w", file, err)
		}
		crds = append(crds, crd)
		return nil
	})
	return crds, err
}

// releaseManifest names files of a project's release manifests by module
// and a glob inside its source (as copied to third_party/).
type releaseManifest struct{ module, glob string }

// manifests calls each with every YAML document of the files ms name, in
// order; a glob that matches nothing is an error.
func manifests(ms []releaseManifest, each func(file string, doc []byte) error) error {
	dirs := map[string]string{}
	for _, m := range ms {
		dir, ok := dirs[m.module]
		if !ok {
			var err error
			if dir, err = ThirdParty(m.module); err != nil {
				return err
			}
			dirs[m.module] = dir
		}
		files, err := filepath.Glob(filepath.Join(dir, m.glob))
		if err != nil || len(files) == 0 {
			return fmt.Errorf("no release manifests %s in %s (%s; hack/third-party.sh copies them): %v", m.glob, m.module, dir, err)
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				return err
			}
			r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
			for {
				doc, err := r.Read()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					return fmt.Errorf("read %s: %w", f, err)
				}
				if err := each(f, doc); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
