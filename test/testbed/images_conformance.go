package testbed

import (
	"context"
	"fmt"
	"path/filepath"
)

// ConformancePrograms are the test images Knative's ingress conformance
// suite (knative.dev/networking/test/conformance/ingress) runs behind the
// Ingresses it makes, by the names its image template takes.
var ConformancePrograms = []string{"runtime", "wsserver", "grpc-ping", "timeout", "httpproxy", "retry"}

// ConformanceRepo is the repository path, under the registry's host, the
// suite's test images are pushed to: its --dockerrepo is
// Registry/ConformanceRepo and its --tag ConformanceTag.
const (
	ConformanceRepo = "knative-conformance"
	ConformanceTag  = "testbed"
)

// ConformanceProgramsDir is where hack/test-assets.sh keeps the static
// programs of ConformancePrograms, building them on first use.
func ConformanceProgramsDir() (string, error) {
	return testAssets("conformance-images", "builds the ingress conformance suite's test images from the module proxy")
}

// PushConformanceImages lays each of ConformancePrograms out as ko would
// (the suite's images are ko-built) and pushes it to the node's registry
// as ConformanceRepo/<name>:ConformanceTag. It returns the suite's docker
// repo.
func (n *Node) PushConformanceImages(ctx context.Context) (string, error) {
	dir, err := ConformanceProgramsDir()
	if err != nil {
		return "", err
	}
	for _, name := range ConformancePrograms {
		img, err := koImage(name, filepath.Join(dir, name))
		if err != nil {
			return "", err
		}
		if _, err := n.Push(ctx, ConformanceRepo+"/"+name, ConformanceTag, img); err != nil {
			return "", fmt.Errorf("conformance image %s: %w", name, err)
		}
	}
	return n.Registry + "/" + ConformanceRepo, nil
}
