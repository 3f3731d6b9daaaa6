package resources

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"knative.dev/serving/pkg/apis/config"
)

// Knative Serving's system namespace, where config-features lives.
const KnativeNamespace = "knative-serving"

// FeaturePodSpecPVCWrite lets a revision write to its claims; Knative
// v0.50 names no constant for it.
const FeaturePodSpecPVCWrite = "kubernetes.podspec-persistent-volume-write"

// Feature is a Knative config-features flag a revision's pod spec needs,
// with the spec field that needs it.
type Feature struct {
	Flag  string
	Field string
}

// RequiredFeatures lists the flags Knative's webhook checks before it
// takes pod's scheduling fields and volumes, in a fixed order.
func RequiredFeatures(pod *corev1.PodSpec) []Feature {
	var out []Feature
	if len(pod.NodeSelector) > 0 {
		out = append(out, Feature{config.FeaturePodSpecNodeSelector, "nodeSelector"})
	}
	if len(pod.Tolerations) > 0 {
		out = append(out, Feature{config.FeaturePodSpecTolerations, "tolerations"})
	}
	if pod.Affinity != nil {
		out = append(out, Feature{config.FeaturePodSpecAffinity, "affinity"})
	}
	if pod.PriorityClassName != "" {
		out = append(out, Feature{config.FeaturePodSpecPriorityClassName, "priorityClassName"})
	}
	if pod.RuntimeClassName != nil {
		out = append(out, Feature{config.FeaturePodSpecRuntimeClassName, "runtimeClassName"})
	}
	// Each volume flag once, named by the first volume that needs it.
	seen := map[string]bool{}
	need := func(flag, field string) {
		if !seen[flag] {
			seen[flag] = true
			out = append(out, Feature{flag, field})
		}
	}
	for i, v := range pod.Volumes {
		switch {
		case v.EmptyDir != nil:
			need(config.FeaturePodSpecEmptyDir, fmt.Sprintf("volumes[%d].emptyDir", i))
		case v.PersistentVolumeClaim != nil:
			need(config.FeaturePodSpecPVClaim, fmt.Sprintf("volumes[%d].persistentVolumeClaim", i))
			if !v.PersistentVolumeClaim.ReadOnly {
				need(FeaturePodSpecPVCWrite, fmt.Sprintf("volumes[%d].persistentVolumeClaim.readOnly: false", i))
			}
		}
	}
	return out
}

var volumeFlags = map[string]bool{config.FeaturePodSpecEmptyDir: true, config.FeaturePodSpecPVClaim: true, FeaturePodSpecPVCWrite: true}

// DisabledFeatures is what of need features has off; Knative accepts a
// scheduling field whose flag is enabled or allowed, a volume only when
// its flag is enabled.
func DisabledFeatures(need []Feature, features *config.Features) []Feature {
	state := map[string]config.Flag{
		config.FeaturePodSpecNodeSelector:      features.PodSpecNodeSelector,
		config.FeaturePodSpecTolerations:       features.PodSpecTolerations,
		config.FeaturePodSpecAffinity:          features.PodSpecAffinity,
		config.FeaturePodSpecPriorityClassName: features.PodSpecPriorityClassName,
		config.FeaturePodSpecRuntimeClassName:  features.PodSpecRuntimeClassName,
		config.FeaturePodSpecEmptyDir:          features.PodSpecVolumesEmptyDir,
		config.FeaturePodSpecPVClaim:           features.PodSpecPersistentVolumeClaim,
		FeaturePodSpecPVCWrite:                 features.PodSpecPersistentVolumeWrite,
	}
	var out []Feature
	for _, f := range need {
		// Knative's volume checks take only Enabled; the others take Allowed too.
		if st := state[f.Flag]; st == config.Disabled || (volumeFlags[f.Flag] && st != config.Enabled) {
			out = append(out, f)
		}
	}
	return out
}

// DisabledFeaturesMessage says which fields wait for which flags, and the
// command that turns them on.
func DisabledFeaturesMessage(off []Feature) string {
	fields, flags, patch := make([]string, len(off)), make([]string, len(off)), make([]string, len(off))
	for i, f := range off {
		fields[i] = "spec." + f.Field
		flags[i] = f.Flag
		patch[i] = fmt.Sprintf("%q:%q", f.Flag, strings.ToLower(string(config.Enabled)))
	}
	return fmt.Sprintf("%s needs Knative's %s, disabled in ConfigMap %s/%s; a cluster admin turns it on with: "+
		"kubectl patch configmap %s -n %s --type merge -p '{\"data\":{%s}}'",
		strings.Join(fields, ", "), strings.Join(flags, ", "), KnativeNamespace, config.FeaturesConfigName,
		config.FeaturesConfigName, KnativeNamespace, strings.Join(patch, ","))
}
