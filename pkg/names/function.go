// Package names derives every name sless gives to the objects it makes for
// Functions, SlessServices, FunctionJobs and Triggers, in one place, so the
// reconcilers, the cluster adapters, local mode, tests and docs agree. It
// sits below all of them and imports none.
package names

import (
	"fmt"
	"strconv"
	"strings"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/names/blobkey"
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
// it. attempt counts the runs of the digest sless cancelled as superseded
// before this one: a source edited back to one whose build was cancelled
// is built again under the next name, <name>-<hex>-<attempt>, as the
// cancelled run never yields an image. Function names are at most 52
// characters and the suffix, dash included, is 11, so the name fits in 63:
// Tekton labels the build's pods with it.
func PipelineRun(fn slessv1alpha1.Workload, digest string, attempt int) string {
	h := digestHex(digest)
	n := 10
	suffix := ""
	if attempt > 0 {
		suffix = "-" + strconv.Itoa(attempt)
		n = max(10-len(suffix), 1)
	}
	if len(h) > n {
		h = h[:n]
	}
	return fn.GetName() + "-" + h + suffix
}

// Service is the Knative Service that serves the function.
func Service(fn slessv1alpha1.Workload) string {
	return fn.GetName()
}

// Revision is the Knative revision made for the function's current
// generation, in Knative's own <name>-<5 digits> form while that fits in a
// DNS label with WarmRevision's suffix, else in a shorter form of the
// generation (see generationSuffix).
func Revision(fn slessv1alpha1.Workload) string {
	return fmt.Sprintf("%s-%s", fn.GetName(), generationSuffix(fn.GetGeneration(), revisionRoom(fn.GetName())))
}

// RetemplatedRevision names the revision of a template that changed while
// the generation did not — a rebuild after a sless upgrade changed the
// runtime wrapper, a changed controller setting — when the generation's
// Revision name is taken by another template: Knative refuses a changed
// template under a revision name in use. The name is made from the
// template's digest, five letters (so never a generation's five digits),
// and fits where Revision does, WarmRevision's suffix included.
func RetemplatedRevision(fn slessv1alpha1.Workload, templateDigest [32]byte) string {
	b := make([]byte, 5)
	for i := range b {
		b[i] = 'a' + templateDigest[i]%26
	}
	return fn.GetName() + "-" + string(b)
}

// WarmRevision is the name of a generation's revision while a cron
// trigger's pre-warm hold raises its min-scale. Revision and
// RetemplatedRevision leave room for the suffix, so it fits in 63.
func WarmRevision(revision string) string {
	return revision + warmSuffix
}

// ObjectPrefix is where all of a function's S3 objects live; the finalizer
// deletes it. The layout of keys is blobkey's, which the REST API writes
// by and the sweep of unneeded objects (pkg/sourcegc) parses: one
// definition, so the three never disagree on where an object lies.
func ObjectPrefix(namespace, name string) string {
	return blobkey.Prefix(namespace, name)
}

// ContextKey is the S3 key of a build context, content-addressed so that
// an unchanged source is stored once; the key the API stores an upload's
// context under.
func ContextKey(namespace, name, digest string) string {
	return blobkey.Context(namespace, name, digest)
}

// ImageRepository is where a function's images are pushed: one repository
// per function under the configured registry prefix.
func ImageRepository(registry string, fn slessv1alpha1.Workload) string {
	return strings.TrimSuffix(registry, "/") + "/" + fn.GetNamespace() + "/" + fn.GetName()
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

// WorkloadPrefix is where all of w's S3 objects live: ObjectPrefix for a
// Function, blobkey's ServicePrefix for a SlessService, so that a service
// and a function of one name never share (or delete) an object.
func WorkloadPrefix(w slessv1alpha1.Workload) string {
	if w.WorkloadKind() == slessv1alpha1.KindSlessService {
		return blobkey.ServicePrefix(w.GetNamespace(), w.GetName())
	}
	return ObjectPrefix(w.GetNamespace(), w.GetName())
}

// WorkloadContextKey is the S3 key of w's build context of digest.
func WorkloadContextKey(w slessv1alpha1.Workload, digest string) string {
	if w.WorkloadKind() == slessv1alpha1.KindSlessService {
		return blobkey.ServiceContext(w.GetNamespace(), w.GetName(), digest)
	}
	return ContextKey(w.GetNamespace(), w.GetName(), digest)
}
