package resources

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
)

// SetVolumes puts the spec's volumes on a pod spec and mounts each in c at
// its mount path. Secrets and ConfigMaps are mounted read-only, as Knative
// requires of them; a claim is as read-only as the spec says.
func SetVolumes(pod *corev1.PodSpec, c *corev1.Container, vols []slessv1alpha1.Volume) {
	pod.Volumes, c.VolumeMounts = nil, nil
	for _, v := range vols {
		vol := corev1.Volume{Name: v.Name}
		mount := corev1.VolumeMount{Name: v.Name, MountPath: v.MountPath}
		switch {
		case v.Secret != nil:
			vol.Secret = &corev1.SecretVolumeSource{SecretName: v.Secret.SecretName, Items: keyToPaths(v.Secret.Items),
				DefaultMode: copyMode(v.Secret.DefaultMode)}
			mount.ReadOnly = true
		case v.ConfigMap != nil:
			vol.ConfigMap = &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: v.ConfigMap.Name},
				Items: keyToPaths(v.ConfigMap.Items), DefaultMode: copyMode(v.ConfigMap.DefaultMode)}
			mount.ReadOnly = true
		case v.EmptyDir != nil:
			vol.EmptyDir = &corev1.EmptyDirVolumeSource{Medium: v.EmptyDir.Medium}
			if v.EmptyDir.SizeLimit != nil {
				vol.EmptyDir.SizeLimit = ptr.To(v.EmptyDir.SizeLimit.DeepCopy())
			}
		case v.PersistentVolumeClaim != nil:
			vol.PersistentVolumeClaim = &corev1.PersistentVolumeClaimVolumeSource{ClaimName: v.PersistentVolumeClaim.ClaimName,
				ReadOnly: v.PersistentVolumeClaim.ReadOnly}
			mount.ReadOnly = v.PersistentVolumeClaim.ReadOnly
		default:
			continue
		}
		pod.Volumes = append(pod.Volumes, vol)
		c.VolumeMounts = append(c.VolumeMounts, mount)
	}
}

// VolumesOf reads SetVolumes' work back from a revision's pod spec: the
// volumes mounted in its container named ContainerName.
func VolumesOf(pod *corev1.PodSpec) []slessv1alpha1.Volume {
	var mounts []corev1.VolumeMount
	for _, c := range pod.Containers {
		if c.Name == ContainerName || len(pod.Containers) == 1 {
			mounts = c.VolumeMounts
		}
	}
	byName := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		byName[v.Name] = v
	}
	var out []slessv1alpha1.Volume
	for _, m := range mounts {
		src, ok := byName[m.Name]
		if !ok {
			continue
		}
		v := slessv1alpha1.Volume{Name: m.Name, MountPath: m.MountPath}
		switch {
		case src.Secret != nil:
			v.Secret = &slessv1alpha1.SecretVolume{SecretName: src.Secret.SecretName, Items: fromKeyToPaths(src.Secret.Items), DefaultMode: copyMode(src.Secret.DefaultMode)}
		case src.ConfigMap != nil:
			v.ConfigMap = &slessv1alpha1.ConfigMapVolume{Name: src.ConfigMap.Name, Items: fromKeyToPaths(src.ConfigMap.Items), DefaultMode: copyMode(src.ConfigMap.DefaultMode)}
		case src.EmptyDir != nil:
			v.EmptyDir = &slessv1alpha1.EmptyDirVolume{Medium: src.EmptyDir.Medium}
			if src.EmptyDir.SizeLimit != nil {
				v.EmptyDir.SizeLimit = ptr.To(src.EmptyDir.SizeLimit.DeepCopy())
			}
		case src.PersistentVolumeClaim != nil:
			v.PersistentVolumeClaim = &slessv1alpha1.PVCVolume{ClaimName: src.PersistentVolumeClaim.ClaimName, ReadOnly: src.PersistentVolumeClaim.ReadOnly}
		default:
			continue
		}
		out = append(out, v)
	}
	return out
}

func keyToPaths(items []slessv1alpha1.KeyToPath) []corev1.KeyToPath {
	var out []corev1.KeyToPath
	for _, it := range items {
		out = append(out, corev1.KeyToPath{Key: it.Key, Path: it.Path, Mode: copyMode(it.Mode)})
	}
	return out
}

func fromKeyToPaths(items []corev1.KeyToPath) []slessv1alpha1.KeyToPath {
	var out []slessv1alpha1.KeyToPath
	for _, it := range items {
		out = append(out, slessv1alpha1.KeyToPath{Key: it.Key, Path: it.Path, Mode: copyMode(it.Mode)})
	}
	return out
}

func copyMode(m *int32) *int32 {
	if m == nil {
		return nil
	}
	return ptr.To(*m)
}
