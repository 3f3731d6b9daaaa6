package knative

import (
	"context"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sless-dev/sless/pkg/adapter"
	"github.com/sless-dev/sless/pkg/adapter/resources"
)

var _ adapter.MinScaleSetter = (*MinScale)(nil)

// Annotations MinScale keeps on the Service. Server, which writes the
// Service's template for the Function reconciler, keeps the template's
// min-scale at least 1, under the revision name <name>-warm, while any
// HoldAnnotationPrefix annotation is present (keepPrewarm), and otherwise
// writes it from spec.scale.min as always.
const (
	MinScaleAnnotation      = "autoscaling.knative.dev/min-scale"
	HoldAnnotationPrefix    = resources.PrewarmHoldPrefix
	SavedMinScaleAnnotation = "sless.dev/prewarm-saved-min-scale"
	savedNone               = "none"
	// WarmSuffix ends the revision name of a held template (the Function
	// reconciler's names.WarmRevision).
	WarmSuffix = "-warm"
)

var knativeService = schema.GroupVersionKind{Group: "serving.knative.dev", Version: "v1", Kind: "Service"}

// MinScale implements adapter.MinScaleSetter on the function's Knative Service
// by patching autoscaling.knative.dev/min-scale on its revision template,
// which is where Knative reads it. The patch carries the resourceVersion, so
// a concurrent writer (the Function reconciler) makes it fail and retry
// rather than be overwritten. It works on unstructured objects, touching
// only the annotations and template name it owns.
type MinScale struct {
	Client client.Client
	// ServiceName maps a function to its Knative Service's name; the
	// function's own name when nil.
	ServiceName func(function string) string
}

func (k *MinScale) get(ctx context.Context, namespace, function string) (*unstructured.Unstructured, error) {
	name := function
	if k.ServiceName != nil {
		name = k.ServiceName(function)
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(knativeService)
	if err := k.Client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, u); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	return u, nil
}

func holds(u *unstructured.Unstructured) int {
	n := 0
	for k := range u.GetAnnotations() {
		if strings.HasPrefix(k, HoldAnnotationPrefix) {
			n++
		}
	}
	return n
}

func templateAnnotations(u *unstructured.Unstructured) map[string]string {
	m, _, _ := unstructured.NestedStringMap(u.Object, "spec", "template", "metadata", "annotations")
	if m == nil {
		m = map[string]string{}
	}
	return m
}

// RaiseMinScale implements adapter.MinScaleSetter.
func (k *MinScale) RaiseMinScale(ctx context.Context, namespace, function, holder string) error {
	u, err := k.get(ctx, namespace, function)
	if err != nil || u == nil {
		return err
	}
	ann := u.GetAnnotations()
	if _, held := ann[HoldAnnotationPrefix+holder]; held && minScaleOf(templateAnnotations(u)) >= 1 {
		return nil
	}
	orig := u.DeepCopy()
	tmpl := templateAnnotations(u)
	if ann == nil {
		ann = map[string]string{}
	}
	if holds(u) == 0 {
		if v, ok := tmpl[MinScaleAnnotation]; ok {
			ann[SavedMinScaleAnnotation] = v
		} else {
			ann[SavedMinScaleAnnotation] = savedNone
		}
	}
	ann[HoldAnnotationPrefix+holder] = "true"
	u.SetAnnotations(ann)
	if minScaleOf(tmpl) < 1 {
		tmpl[MinScaleAnnotation] = "1"
		if err := unstructured.SetNestedStringMap(u.Object, tmpl, "spec", "template", "metadata", "annotations"); err != nil {
			return err
		}
		// Knative refuses a changed template that keeps its revision name;
		// the held template is revision <name>-warm, as the Function
		// reconciler names it too, so neither undoes the other.
		if name, _, _ := unstructured.NestedString(u.Object, "spec", "template", "metadata", "name"); name != "" && !strings.HasSuffix(name, WarmSuffix) {
			if err := unstructured.SetNestedField(u.Object, name+WarmSuffix, "spec", "template", "metadata", "name"); err != nil {
				return err
			}
		}
	}
	return k.Client.Patch(ctx, u, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
}

// RestoreMinScale implements adapter.MinScaleSetter.
func (k *MinScale) RestoreMinScale(ctx context.Context, namespace, function, holder string) error {
	u, err := k.get(ctx, namespace, function)
	if err != nil || u == nil {
		return err
	}
	ann := u.GetAnnotations()
	if _, held := ann[HoldAnnotationPrefix+holder]; !held {
		return nil
	}
	orig := u.DeepCopy()
	delete(ann, HoldAnnotationPrefix+holder)
	u.SetAnnotations(ann)
	if holds(u) == 0 {
		tmpl := templateAnnotations(u)
		switch saved, ok := ann[SavedMinScaleAnnotation]; {
		case !ok:
			// Nothing saved (the annotation was removed by hand): leave the
			// template as the Function reconciler last wrote it.
		case saved == savedNone:
			delete(tmpl, MinScaleAnnotation)
		default:
			tmpl[MinScaleAnnotation] = saved
		}
		delete(ann, SavedMinScaleAnnotation)
		u.SetAnnotations(ann)
		// Back to the generation's plain revision, which Knative reuses.
		if name, _, _ := unstructured.NestedString(u.Object, "spec", "template", "metadata", "name"); strings.HasSuffix(name, WarmSuffix) {
			if err := unstructured.SetNestedField(u.Object, strings.TrimSuffix(name, WarmSuffix), "spec", "template", "metadata", "name"); err != nil {
				return err
			}
		}
		if len(tmpl) == 0 {
			unstructured.RemoveNestedField(u.Object, "spec", "template", "metadata", "annotations")
		} else if err := unstructured.SetNestedStringMap(u.Object, tmpl, "spec", "template", "metadata", "annotations"); err != nil {
			return err
		}
	}
	return k.Client.Patch(ctx, u, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
}

func minScaleOf(tmpl map[string]string) int {
	n, err := strconv.Atoi(tmpl[MinScaleAnnotation])
	if err != nil {
		return 0
	}
	return n
}
