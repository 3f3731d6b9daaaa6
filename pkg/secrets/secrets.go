// Package secrets holds what sless knows of the Secrets users keep through
// its API: how they are labelled, named and bounded, and which of them a
// Function's env refers to. Values are bytes the API stores and never shows;
// the stores (Kubernetes Secrets on a cluster, pkg/secrets/sealed locally)
// keep them.
package secrets

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

const (
	// LabelManagedBy and ManagedBy mark every object sless makes.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "sless"
	// LabelSecret marks a Secret made through the secrets API: only those
	// are listed, shown, rotated or deleted through it, so a user's other
	// Secrets in the namespace (and sless's own trigger credentials) stay
	// out of its reach.
	LabelSecret = "sless.dev/secret"
	// AnnotationUpdated is when the data was last set (RFC 3339):
	// Kubernetes keeps only the creation time.
	AnnotationUpdated = "sless.dev/updated-at"

	// MaxBytes bounds the keys and values of one secret together; the
	// apiserver refuses a Secret past 1 MiB, and the API says so first.
	MaxBytes = 512 << 10
	// MaxKeys bounds the keys of one secret.
	MaxKeys = 64
)

// Selector picks the Secrets made through the API.
func Selector() labels.Selector {
	return labels.SelectorFromSet(labels.Set{LabelManagedBy: ManagedBy, LabelSecret: "true"})
}

// Managed tells a Secret made through the API from any other.
func Managed(s *corev1.Secret) bool { return Selector().Matches(labels.Set(s.Labels)) }

// Make builds the Secret holding data, labelled as the API's, updated at now.
func Make(namespace, name string, data map[string][]byte, now time.Time) *corev1.Secret {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Type:       corev1.SecretTypeOpaque,
	}
	SetData(s, data, now)
	s.Labels = map[string]string{LabelManagedBy: ManagedBy, LabelSecret: "true"}
	return s
}

// SetData replaces s's data and stamps the time it changed.
func SetData(s *corev1.Secret, data map[string][]byte, now time.Time) {
	s.Data = data
	s.StringData = nil
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	s.Annotations[AnnotationUpdated] = now.UTC().Format(time.RFC3339)
}

// Updated is when s's data was last set: the annotation, else its creation.
func Updated(s *corev1.Secret) metav1.Time {
	if t, err := time.Parse(time.RFC3339, s.Annotations[AnnotationUpdated]); err == nil {
		return metav1.NewTime(t)
	}
	return s.CreationTimestamp
}

// Keys are the names of s's data, sorted.
func Keys(s *corev1.Secret) []string {
	keys := make([]string, 0, len(s.Data))
	for k := range s.Data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// ValidateName checks a secret's name as Kubernetes does a Secret's (a
// DNS-1123 subdomain), so any name taken here can be referenced by
// secretKeyRef on a cluster too.
func ValidateName(name string) []string {
	return validation.IsDNS1123Subdomain(name)
}

// ValidateData checks the keys (as a Kubernetes Secret's: letters, digits,
// '-', '_' and '.') and the size of data. Errors name keys, never values.
func ValidateData(data map[string][]byte, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(data) == 0 {
		errs = append(errs, field.Required(p, "a secret holds at least one key"))
	}
	if len(data) > MaxKeys {
		errs = append(errs, field.TooMany(p, len(data), MaxKeys))
	}
	total := 0
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		total += len(k) + len(data[k])
		for _, msg := range validation.IsConfigMapKey(k) {
			errs = append(errs, field.Invalid(p.Key(k), k, msg))
		}
	}
	if total > MaxBytes {
		e := field.TooLong(p, nil, MaxBytes)
		e.Detail = fmt.Sprintf("keys and values together take %d bytes, at most %d", total, MaxBytes)
		errs = append(errs, e)
	}
	return errs
}

// Referenced are the names of the Secrets env's secretKeyRef entries
// name, sorted, each once.
func Referenced(env []corev1.EnvVar) []string {
	var out []string
	for _, e := range env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name != "" {
			out = append(out, e.ValueFrom.SecretKeyRef.Name)
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// Versions is the annotation value recording the version of each Secret a
// revision was made with, name=resourceVersion sorted by name ("" for
// none). It changes when a referenced Secret does, which makes a new
// revision: Knative does not restart pods when a Secret changes. Versions
// rather than a digest of the data, which would let a reader of the
// revision test guesses of a weak value.
func Versions(versions map[string]string) string {
	names := make([]string, 0, len(versions))
	for n := range versions {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = n + "=" + versions[n]
	}
	return strings.Join(parts, ",")
}

// Info is a secret as the API shows it: its keys, never their values.
type Info struct {
	Metadata Metadata `json:"metadata"`
	Type     string   `json:"type"`
	// Keys are the names of the values, sorted.
	Keys []string `json:"keys"`
	// UpdatedAt is when the values were last set.
	UpdatedAt metav1.Time `json:"updatedAt"`
}

// Metadata is the part of a Secret's metadata the API shows.
type Metadata struct {
	Name              string      `json:"name"`
	Namespace         string      `json:"namespace,omitempty"`
	UID               string      `json:"uid,omitempty"`
	ResourceVersion   string      `json:"resourceVersion,omitempty"`
	CreationTimestamp metav1.Time `json:"creationTimestamp,omitempty"`
}

// InfoOf is s as the API shows it.
func InfoOf(s *corev1.Secret) Info {
	return Info{
		Metadata: Metadata{Name: s.Name, Namespace: s.Namespace, UID: string(s.UID),
			ResourceVersion: s.ResourceVersion, CreationTimestamp: s.CreationTimestamp},
		Type:      string(s.Type),
		Keys:      Keys(s),
		UpdatedAt: Updated(s),
	}
}

// Input is the body of a create (POST) or a rotation (PUT): the values as
// text (stringData) or base64 (data), as a Kubernetes Secret takes them.
// A key may be given in one of the two only.
type Input struct {
	Metadata   InputMetadata     `json:"metadata"`
	StringData map[string]string `json:"stringData,omitempty"`
	Data       map[string][]byte `json:"data,omitempty"`
}

// InputMetadata names the secret; resourceVersion, when given, must be the
// current one (a rotation of what the client read, as If-Match).
type InputMetadata struct {
	Name            string `json:"name,omitempty"`
	Namespace       string `json:"namespace,omitempty"`
	ResourceVersion string `json:"resourceVersion,omitempty"`
}

// Patch is the body of a PATCH (application/merge-patch+json): the keys to
// set, and those to remove as null; the other keys keep their values.
type Patch struct {
	Metadata   InputMetadata      `json:"metadata"`
	StringData map[string]*string `json:"stringData,omitempty"`
	Data       map[string]*[]byte `json:"data,omitempty"`
}

// CacheSelector picks the Secrets a controller caches: those sless makes
// (the secrets API's and the trigger credentials), not every Secret of the
// cluster. A Function's revision follows the versions of the Secrets it
// refers to that are among them.
func CacheSelector() labels.Selector {
	return labels.SelectorFromSet(labels.Set{LabelManagedBy: ManagedBy})
}
