package client

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/source"
)

// Manifest is sless.yaml: what `sless deploy` makes of a folder.
type Manifest struct {
	// Kind is function (the default) or service.
	Kind           string            `json:"kind,omitempty"`
	Name           string            `json:"name"`
	Runtime        string            `json:"runtime"`
	Entrypoint     string            `json:"entrypoint"`
	MemoryMB       *int32            `json:"memoryMB,omitempty"`
	TimeoutSeconds *int32            `json:"timeoutSeconds,omitempty"`
	Env            map[string]string `json:"env,omitempty"`
	// SecretEnv maps a variable to SECRET/KEY, a value of a secret.
	SecretEnv map[string]string `json:"secretEnv,omitempty"`
	// A service's scale, refused for a function.
	MinScale             *int32 `json:"minScale,omitempty"`
	MaxScale             *int32 `json:"maxScale,omitempty"`
	ContainerConcurrency *int64 `json:"containerConcurrency,omitempty"`
	// Volumes are spec.volumes as the Function's (docs/volumes.md); an
	// empty list removes those the workload has, none leaves them.
	Volumes []slessv1alpha1.Volume `json:"volumes,omitempty"`
}

// The kinds a Manifest may name.
const (
	KindFunction = "function"
	KindService  = "service"
)

// KindOrDefault is the manifest's kind with the default filled in.
func (m Manifest) KindOrDefault() string {
	if m.Kind == "" {
		return KindFunction
	}
	return m.Kind
}

// ReadManifest reads dir's sless.yaml, refusing fields it does not know; a
// folder without one gives the zero Manifest.
func ReadManifest(dir string) (Manifest, error) {
	var m Manifest
	b, err := os.ReadFile(filepath.Join(dir, source.ManifestFile))
	switch {
	case err == nil:
		if err := yaml.UnmarshalStrict(b, &m); err != nil {
			return Manifest{}, fmt.Errorf("%s: %w", filepath.Join(dir, source.ManifestFile), err)
		}
	case !errors.Is(err, os.ErrNotExist):
		return Manifest{}, err
	}
	return m, nil
}

// Check tells every mistake of m (read from dir) before anything is
// uploaded, in the words of the CLI's flags and of sless.yaml.
func (m Manifest) Check(dir string) error {
	var errs []error
	kind := m.KindOrDefault()
	if kind != KindFunction && kind != KindService {
		errs = append(errs, fmt.Errorf("kind %q in %s: want function or service", m.Kind, source.ManifestFile))
	}
	switch {
	case m.Name == "":
		errs = append(errs, fmt.Errorf("no %s name: give --name or write name: in %s (sless new makes one)", kind, filepath.Join(dir, source.ManifestFile)))
	case kind == KindService:
		// A service's name is a DNS-1035 label of at most 52 characters,
		// as the CRD says, so that its Knative Service's hosts fit.
		if msgs := validation.IsDNS1035Label(m.Name); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("name %q: %s", m.Name, strings.Join(msgs, "; ")))
		} else if len(m.Name) > 52 {
			errs = append(errs, fmt.Errorf("name %q: a service's name must be at most 52 characters", m.Name))
		}
	default:
		if msgs := validation.IsDNS1123Label(m.Name); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("name %q: %s", m.Name, strings.Join(msgs, "; ")))
		}
	}
	errs = append(errs, m.checkScale()...)
	for _, e := range slessv1alpha1.ValidateVolumes(m.Volumes, field.NewPath("volumes")) {
		errs = append(errs, fmt.Errorf("%s in %s", e.Error(), source.ManifestFile))
	}
	if m.Runtime == "" {
		errs = append(errs, errors.New("no runtime: give --runtime or write runtime: in "+source.ManifestFile))
	}
	if m.Entrypoint == "" {
		errs = append(errs, errors.New("no entrypoint: give --entrypoint or write entrypoint: in "+source.ManifestFile))
	}
	for _, k := range slices.Sorted(maps.Keys(m.SecretEnv)) {
		if _, ok := m.Env[k]; ok {
			errs = append(errs, fmt.Errorf("%s is in both env and secretEnv of %s", k, source.ManifestFile))
		}
		if _, _, ok := secretRef(m.SecretEnv[k]); !ok {
			errs = append(errs, fmt.Errorf("secretEnv %s: %q is not SECRET/KEY (e.g. db/password)", k, m.SecretEnv[k]))
		}
	}
	return errors.Join(errs...)
}

// checkScale refuses a service's scale on a function and bounds it as the
// SlessService CRD does, so a mistake is told before the upload.
func (m Manifest) checkScale() []error {
	var errs []error
	if m.KindOrDefault() != KindService {
		for k, set := range map[string]bool{"minScale": m.MinScale != nil, "maxScale": m.MaxScale != nil, "containerConcurrency": m.ContainerConcurrency != nil} {
			if set {
				errs = append(errs, fmt.Errorf("%s in %s is for a service: write kind: service or give --service", k, source.ManifestFile))
			}
		}
		slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
		return errs
	}
	if v := m.MinScale; v != nil && (*v < 0 || *v > slessv1alpha1.MaxScale) {
		errs = append(errs, fmt.Errorf("minScale %d: want 0 to %d", *v, slessv1alpha1.MaxScale))
	}
	if v := m.MaxScale; v != nil && (*v < 1 || *v > slessv1alpha1.MaxScale) {
		errs = append(errs, fmt.Errorf("maxScale %d: want 1 to %d", *v, slessv1alpha1.MaxScale))
	}
	if m.MinScale != nil && m.MaxScale != nil && *m.MaxScale < *m.MinScale {
		errs = append(errs, fmt.Errorf("maxScale %d is below minScale %d", *m.MaxScale, *m.MinScale))
	}
	if v := m.ContainerConcurrency; v != nil && (*v < 0 || *v > 1000) {
		errs = append(errs, fmt.Errorf("containerConcurrency %d: want 0 (no limit) to 1000", *v))
	}
	return errs
}

// secretRef splits SECRET/KEY.
func secretRef(s string) (secret, key string, ok bool) {
	secret, key, ok = strings.Cut(s, "/")
	return secret, key, ok && secret != "" && key != "" && !strings.Contains(key, "/")
}

// ServiceSpec is the SlessService the manifest describes, with the given source.
func (m Manifest) ServiceSpec(src slessv1alpha1.FunctionSource) slessv1alpha1.SlessServiceSpec {
	return slessv1alpha1.SlessServiceSpec{
		WorkloadSpec:         m.workloadSpec(src),
		TimeoutSeconds:       m.TimeoutSeconds,
		MinScale:             m.MinScale,
		MaxScale:             m.MaxScale,
		ContainerConcurrency: m.ContainerConcurrency,
	}
}

// Spec is the Function the manifest describes, with the given source.
func (m Manifest) Spec(src slessv1alpha1.FunctionSource) slessv1alpha1.FunctionSpec {
	return slessv1alpha1.FunctionSpec{WorkloadSpec: m.workloadSpec(src), TimeoutSeconds: m.TimeoutSeconds}
}

// workloadSpec is what a Function and a SlessService share.
func (m Manifest) workloadSpec(src slessv1alpha1.FunctionSource) slessv1alpha1.WorkloadSpec {
	return slessv1alpha1.WorkloadSpec{Runtime: m.Runtime, Entrypoint: m.Entrypoint, Source: src, MemoryMB: m.MemoryMB, Env: m.EnvVars(),
		Volumes: m.Volumes}
}

// EnvVars are the workload's env: the values, then the secrets' keys,
// each sorted by name.
func (m Manifest) EnvVars() []slessv1alpha1.EnvVar {
	var env []slessv1alpha1.EnvVar
	for _, k := range slices.Sorted(maps.Keys(m.Env)) {
		env = append(env, slessv1alpha1.EnvVar{Name: k, Value: m.Env[k]})
	}
	for _, k := range slices.Sorted(maps.Keys(m.SecretEnv)) {
		secret, key, _ := secretRef(m.SecretEnv[k])
		env = append(env, slessv1alpha1.EnvVar{Name: k, ValueFrom: &corev1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: key}}})
	}
	return env
}

// Patch is the merge patch that brings a Function's spec, or a service's
// BuildSpec, to the manifest's settings besides the code (the upload set
// those), or nil when it has them.
func (m Manifest) Patch(cur *slessv1alpha1.FunctionSpec) map[string]any {
	spec := map[string]any{}
	if differs(m.MemoryMB, cur.MemoryMB) {
		spec["memoryMB"] = *m.MemoryMB
	}
	if differs(m.TimeoutSeconds, cur.TimeoutSeconds) {
		spec["timeoutSeconds"] = *m.TimeoutSeconds
	}
	if m.Env != nil || m.SecretEnv != nil {
		want := m.EnvVars()
		if !equality.Semantic.DeepEqual(want, cur.Env) {
			spec["env"] = want
		}
	}
	if m.Volumes != nil && !equality.Semantic.DeepEqual(m.Volumes, cur.Volumes) {
		spec["volumes"] = m.Volumes
	}
	// Only a service's manifest has these (checkScale); a SlessService's
	// BuildSpec carries them in Scale, its spec at the top.
	var scale slessv1alpha1.ScaleSpec
	if cur.Scale != nil {
		scale = *cur.Scale
	}
	if differs(m.MinScale, scale.Min) {
		spec["minScale"] = *m.MinScale
	}
	if differs(m.MaxScale, scale.Max) {
		spec["maxScale"] = *m.MaxScale
	}
	if differs(m.ContainerConcurrency, scale.ContainerConcurrency) {
		spec["containerConcurrency"] = *m.ContainerConcurrency
	}
	if len(spec) == 0 {
		return nil
	}
	return map[string]any{"spec": spec}
}

// differs says whether the manifest sets want and cur is not it.
func differs[T comparable](want, cur *T) bool {
	return want != nil && (cur == nil || *cur != *want)
}
