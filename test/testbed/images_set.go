package testbed

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// NodeImageInputs are the programs the node's images are assembled from.
type NodeImageInputs struct {
	Pause    string // the static pause binary
	Busybox  string // a static busybox (BusyboxPath)
	Kaniko   string // kaniko's executor, static
	Programs string // ImageProgramsDir: Knative's and Tekton's programs
	Sless    string // SlessStatic
}

// NodeImages are the references, pinned by digest, of every image the node
// pulls from the bed's registry.
type NodeImages struct {
	Registry string // host:port
	Pause    string
	Shell    string
	Kaniko   string
	Sless    string
	// Programs maps each of TektonStepPrograms and KnativePrograms to its
	// image.
	Programs map[string]string
	// Bases maps each stand-in's docker.io reference, as a Dockerfile's
	// FROM line names it, to where it was pushed.
	Bases map[string]string
	// Timings says how long each image took to build (or read from the
	// cache) and push, and Sizes its compressed size in bytes.
	Timings map[string]time.Duration
	Sizes   map[string]int64
}

// koPackages are the import paths the release manifests name as ko://
// references, by program.
var koPackages = map[string]string{
	"activator":         "knative.dev/serving/cmd/activator",
	"autoscaler":        "knative.dev/serving/cmd/autoscaler",
	"queue":             "knative.dev/serving/cmd/queue",
	"entrypoint":        "github.com/tektoncd/pipeline/cmd/entrypoint",
	"nop":               "github.com/tektoncd/pipeline/cmd/nop",
	"workingdirinit":    "github.com/tektoncd/pipeline/cmd/workingdirinit",
	"sidecarlogresults": "github.com/tektoncd/pipeline/cmd/sidecarlogresults",
}

// nodeImage is one image the node pulls: where it goes, how it is built,
// and where its reference lands in NodeImages.
type nodeImage struct {
	repo, tag string
	build     func() (v1.Image, error)
	set       func(out *NodeImages, ref string)
}

// nodeImageSet lists the node's images but the runtimes' base stand-ins
// (BaseImages): pause (as pause:3.10), the shell, kaniko, sless, and
// Tekton's step programs and Knative's data plane under tekton/ and
// knative/.
func nodeImageSet(in NodeImageInputs) []nodeImage {
	set := []nodeImage{
		{"pause", "3.10", func() (v1.Image, error) { return PauseImage(in.Pause) }, func(o *NodeImages, r string) { o.Pause = r }},
		{"shell", "latest", func() (v1.Image, error) { return ShellImage(in.Busybox) }, func(o *NodeImages, r string) { o.Shell = r }},
		{"kaniko/executor", "v1.23.2", func() (v1.Image, error) { return KanikoImage(in.Kaniko) }, func(o *NodeImages, r string) { o.Kaniko = r }},
		{"sless", "testbed", func() (v1.Image, error) { return SlessImage(in.Sless) }, func(o *NodeImages, r string) { o.Sless = r }},
	}
	for _, group := range []struct {
		repo  string
		names []string
	}{{"tekton/", TektonStepPrograms}, {"knative/", KnativePrograms}} {
		for _, name := range group.names {
			set = append(set, nodeImage{group.repo + name, "testbed",
				func() (v1.Image, error) { return ProgramImage(in.Programs, name) },
				func(o *NodeImages, r string) { o.Programs[name] = r }})
		}
	}
	return set
}

// BuildNodeImages builds every image PushNodeImages pushes into the asset
// cache. Cold this takes many minutes (the stand-ins' Debian packages,
// Node.js, Go), so it runs under no deadline of its own.
func BuildNodeImages(in NodeImageInputs) error {
	for _, img := range nodeImageSet(in) {
		if _, err := img.build(); err != nil {
			return fmt.Errorf("image %s: %w", img.repo, err)
		}
	}
	_, err := BaseImages()
	return err
}

// PushNodeImages builds every image the node runs (from the asset cache
// once BuildNodeImages ran) and pushes each to the registry at host with
// auth: nodeImageSet's, and the runtimes' base stand-ins under library/.
func PushNodeImages(ctx context.Context, in NodeImageInputs, host string, auth authn.Authenticator) (*NodeImages, error) {
	out := &NodeImages{Registry: host, Programs: map[string]string{}, Bases: map[string]string{},
		Timings: map[string]time.Duration{}, Sizes: map[string]int64{}}
	push := func(repo, tag string, build func() (v1.Image, error)) (string, error) {
		start := time.Now()
		img, err := build()
		if err != nil {
			return "", err
		}
		ref, err := PushImage(ctx, host, repo, tag, img, auth)
		if err != nil {
			return "", err
		}
		out.Timings[repo] = time.Since(start)
		out.Sizes[repo], err = compressedSize(img)
		return ref, err
	}
	for _, img := range nodeImageSet(in) {
		ref, err := push(img.repo, img.tag, img.build)
		if err != nil {
			return nil, err
		}
		img.set(out, ref)
	}
	start := time.Now()
	bases, err := BaseImages()
	if err != nil {
		return nil, err
	}
	out.Timings["library/ stand-ins, all four built"] = time.Since(start)
	for _, b := range bases {
		ref, err := push(b.Repo, b.Tag, func() (v1.Image, error) { return b.Image, nil })
		if err != nil {
			return nil, err
		}
		out.Bases["docker.io/"+b.Repo+":"+b.Tag] = ref
	}
	return out, nil
}

func compressedSize(img v1.Image) (int64, error) {
	layers, err := img.Layers()
	if err != nil {
		return 0, err
	}
	var n int64
	for _, l := range layers {
		s, err := l.Size()
		if err != nil {
			return 0, err
		}
		n += s
	}
	return n, nil
}

// TektonControllerArgs are the flags that give Tekton's controller the
// images it puts into every TaskRun pod.
func (n *NodeImages) TektonControllerArgs() []string {
	return []string{
		"-entrypoint-image", n.Programs["entrypoint"],
		"-nop-image", n.Programs["nop"],
		"-workingdirinit-image", n.Programs["workingdirinit"],
		"-sidecarlogresults-image", n.Programs["sidecarlogresults"],
		"-shell-image", n.Shell,
		// Tekton refuses to start with any image flag unset; this one is
		// for Windows nodes, and the bed has none.
		"-shell-image-win", n.Shell,
	}
}

// KnativeDeploymentConfig is the bed's part of Knative's config-deployment:
// the queue sidecar's image, and no tag resolution against the bed's
// registry, which speaks plain HTTP (sless pins images by digest anyway).
func (n *NodeImages) KnativeDeploymentConfig() map[string]string {
	return map[string]string{
		"queue-sidecar-image":               n.Programs["queue"],
		"registries-skipping-tag-resolving": n.Registry,
	}
}

// koRef matches a ko:// reference in a release manifest.
var koRef = regexp.MustCompile(`ko://[A-Za-z0-9._/-]+`)

// RewriteRelease replaces the ko:// references of a release manifest with
// the images pushed here; a reference to a program the node has no image
// for is an error (the bed runs the controllers and webhooks as host
// processes, so their documents are not for the node).
func (n *NodeImages) RewriteRelease(doc []byte) ([]byte, error) {
	byPackage := map[string]string{}
	for name, pkg := range koPackages {
		byPackage["ko://"+pkg] = n.Programs[name]
	}
	var missing []string
	out := koRef.ReplaceAllFunc(doc, func(ref []byte) []byte {
		if local, ok := byPackage[string(ref)]; ok && local != "" {
			return []byte(local)
		}
		missing = append(missing, string(ref))
		return ref
	})
	if len(missing) > 0 {
		sort.Strings(missing)
		return nil, fmt.Errorf("no image on the node for %s", strings.Join(missing, ", "))
	}
	return out, nil
}

// Summary is one line per image: reference, compressed size and the time it
// took.
func (n *NodeImages) Summary() string {
	var lines []string
	for repo, d := range n.Timings {
		lines = append(lines, fmt.Sprintf("%-40s %6.1f MiB %8s", repo, float64(n.Sizes[repo])/(1<<20), d.Round(time.Millisecond)))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// KanikoArgs are the builder flags that let kaniko pull the runtimes' base
// images, named docker.io/library/… in the generated Dockerfiles, from the
// stand-ins in the bed's registry (never from Docker Hub, which no pod can
// reach), and push to it over plain HTTP.
func (n *NodeImages) KanikoArgs() []string {
	return []string{
		"--registry-mirror=" + n.Registry,
		"--skip-default-registry-fallback",
		"--insecure-registry=" + n.Registry,
		"--insecure",
	}
}
