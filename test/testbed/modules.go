package testbed

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// ModuleDir is the directory of module path's source at the version sless's
// module graph selects, downloaded into the module cache if it is not there
// yet. The download runs outside any module, so go.mod and go.sum stay as
// they are even for a module (knative.dev/caching) no package of sless imports.
func ModuleDir(path string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	list := exec.Command("go", "list", "-m", "-f", "{{.Version}}", path)
	list.Dir = root
	out, err := list.Output()
	if err != nil {
		return "", fmt.Errorf("version of %s in sless's module graph: %w%s", path, err, stderrOf(err))
	}
	version := strings.TrimSpace(string(out))

	tmp, err := os.MkdirTemp("", "sless-moddir-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	dl := exec.Command("go", "mod", "download", "-json", path+"@"+version)
	dl.Dir = tmp
	dl.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GO111MODULE=on")
	out, err = dl.Output()
	var mod struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &mod); jerr == nil && mod.Error != "" {
		return "", fmt.Errorf("download %s@%s: %s", path, version, mod.Error)
	}
	if err != nil {
		return "", fmt.Errorf("download %s@%s: %w%s", path, version, err, stderrOf(err))
	}
	if mod.Dir == "" {
		return "", fmt.Errorf("download %s@%s: no directory in %q", path, version, out)
	}
	return mod.Dir, nil
}

func stderrOf(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) && len(ee.Stderr) > 0 {
		return ": " + strings.TrimSpace(string(ee.Stderr))
	}
	return ""
}

// upstreamCRDs are the CustomResourceDefinitions a cluster running Knative
// Serving and Tekton Pipelines has, read from their release manifests in
// the module cache: the exact schemas the apiserver then enforces.
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
// and a glob inside its source.
type releaseManifest struct{ module, glob string }

// manifests calls each with every YAML document of the files ms name, in
// order; a glob that matches nothing is an error.
func manifests(ms []releaseManifest, each func(file string, doc []byte) error) error {
	dirs := map[string]string{}
	for _, m := range ms {
		dir, ok := dirs[m.module]
		if !ok {
			var err error
			if dir, err = ModuleDir(m.module); err != nil {
				return err
			}
			dirs[m.module] = dir
		}
		files, err := filepath.Glob(filepath.Join(dir, m.glob))
		if err != nil || len(files) == 0 {
			return fmt.Errorf("no release manifests %s in %s (%s): %v", m.glob, m.module, dir, err)
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
