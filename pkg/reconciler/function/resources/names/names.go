// Package names derives every name the Function reconciler gives to the
// objects it makes, in one place.
package names

import (
	"fmt"
	"strings"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
)

// Finalizer holds a Function until its S3 objects are deleted.
const Finalizer = "sless.dev/cleanup"

// digestHex is the hex part of a "sha256:<hex>" digest.
func digestHex(digest string) string {
	return strings.TrimPrefix(digest, "sha256:")
}

// PipelineRun builds one source digest of one function. The name is a pure
// function of both, so a retry, a restarted controller or two controllers
// racing all ask for the same name and the apiserver lets only one create
// it. Function names are at most 52 characters, so the name fits in 63.
func PipelineRun(fn *slessv1alpha1.Function, digest string) string {
	h := digestHex(digest)
	if len(h) > 10 {
		h = h[:10]
	}
	return fn.Name + "-" + h
}

// Service is the Knative Service that serves the function.
func Service(fn *slessv1alpha1.Function) string {
	return fn.Name
}

// Revision is the Knative revision made for the function's current
// generation, in Knative's own <name>-<5 digits> form.
func Revision(fn *slessv1alpha1.Function) string {
	return fmt.Sprintf("%s-%05d", fn.Name, fn.Generation)
}

// WarmRevision is the name of a generation's revision while a cron
// trigger's pre-warm hold raises its min-scale. Function names are at most
// 52 characters, so it fits in 63.
func WarmRevision(revision string) string {
	return revision + "-warm"
}

// ObjectPrefix is where all of a function's S3 objects live; the finalizer
// deletes it.
func ObjectPrefix(namespace, name string) string {
	return namespace + "/" + name + "/"
}

// ContextKey is the S3 key of a build context, content-addressed so that
// an unchanged source is stored once.
func ContextKey(namespace, name, digest string) string {
	return ObjectPrefix(namespace, name) + "context/" + digestHex(digest) + ".tar.gz"
}

// ImageRepository is where a function's images are pushed: one repository
// per function under the configured registry prefix.
func ImageRepository(registry string, fn *slessv1alpha1.Function) string {
	return strings.TrimSuffix(registry, "/") + "/" + fn.Namespace + "/" + fn.Name
}

// ImageTag tags each pushed image with its source digest, so a registry
// listing tells images apart; the Service pins the pushed digest, never it.
func ImageTag(digest string) string {
	h := digestHex(digest)
	if len(h) > 32 {
		h = h[:32]
	}
	return "src-" + h
}
