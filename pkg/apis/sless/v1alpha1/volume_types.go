package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Bounds of spec.volumes; the CRD markers carry the same numbers.
const (
	MaxVolumes         = 8
	MaxMountPathLength = 200
	MaxVolumeItems     = 32
	// MaxFileMode is 0777, the largest mode a projected file may have.
	MaxFileMode = 0o777
)

// Volume is a directory each instance sees at MountPath: a Secret's or a
// ConfigMap's keys as files, an empty scratch directory (emptyDir), or a
// PersistentVolumeClaim. Exactly one source is set.
//
// +kubebuilder:validation:XValidation:rule="[has(self.secret), has(self.configMap), has(self.emptyDir), has(self.persistentVolumeClaim)].filter(x, x).size() == 1",message="a volume takes exactly one of secret, configMap, emptyDir or persistentVolumeClaim"
// +kubebuilder:validation:XValidation:rule="self.mountPath.startsWith('/') && self.mountPath != '/' && !self.mountPath.endsWith('/') && !self.mountPath.contains('//') && !self.mountPath.contains('/./') && !self.mountPath.contains('/../') && !self.mountPath.endsWith('/.') && !self.mountPath.endsWith('/..')",message="mountPath must be an absolute, clean path other than /, such as /etc/app",fieldPath=".mountPath"
// +kubebuilder:validation:XValidation:rule="!['/sless', '/dev', '/proc', '/sys'].exists(r, self.mountPath == r || self.mountPath.startsWith(r + '/')) && !['/usr/local/bin', '/usr/local/lib', '/usr/bin', '/usr/lib', '/bin', '/lib', '/lib64', '/sbin', '/etc/ssl', '/etc/hosts', '/etc/resolv.conf'].exists(r, self.mountPath == r || r.startsWith(self.mountPath + '/'))",message="mountPath must not cover the runtime's own paths: /sless, /dev, /proc, /sys and what is under them, or the interpreter's and system libraries' directories (/usr/local/bin, /usr/lib, /etc/ssl, …) or a parent of them",fieldPath=".mountPath"
type Volume struct {
	// Name names the volume: a DNS-1123 label, unique among the volumes.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +required
	Name string `json:"name"`
	// MountPath is where the instance sees the volume: an absolute path,
	// not /, not overlapping another volume's, and clear of the runtime's
	// own paths (docs/volumes.md lists them).
	// +kubebuilder:validation:MinLength=2
	// +kubebuilder:validation:MaxLength=200
	// +required
	MountPath string `json:"mountPath"`

	// Secret puts a Secret's keys, each as a file, in the directory; it is
	// read-only, and a rotated Secret's files change in place (eventually,
	// as the kubelet syncs them: about a minute).
	// +optional
	Secret *SecretVolume `json:"secret,omitempty"`
	// ConfigMap puts a ConfigMap's keys, each as a file, in the directory;
	// read-only, and updated in place like a Secret's.
	// +optional
	ConfigMap *ConfigMapVolume `json:"configMap,omitempty"`
	// EmptyDir is a scratch directory of each instance, empty when it
	// starts and gone when it stops.
	// +optional
	EmptyDir *EmptyDirVolume `json:"emptyDir,omitempty"`
	// PersistentVolumeClaim mounts a claim of the namespace: what is
	// written there outlives instances. Not available in local mode.
	// +optional
	PersistentVolumeClaim *PVCVolume `json:"persistentVolumeClaim,omitempty"`
}

// SecretVolume names the Secret whose keys become files.
type SecretVolume struct {
	// SecretName is the Secret of the function's namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +required
	SecretName string `json:"secretName"`
	// Items picks keys and the relative paths their files get; unset, every
	// key becomes a file named as the key.
	// +kubebuilder:validation:MaxItems=32
	// +optional
	Items []KeyToPath `json:"items,omitempty"`
	// DefaultMode is the files' mode, 0 to 0777 (JSON and YAML take decimal:
	// 0440 is 288); unset, 0644.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=511
	// +optional
	DefaultMode *int32 `json:"defaultMode,omitempty"`
}

// ConfigMapVolume names the ConfigMap whose keys become files.
type ConfigMapVolume struct {
	// Name is the ConfigMap of the function's namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +required
	Name string `json:"name"`
	// Items picks keys and the relative paths their files get; unset, every
	// key becomes a file named as the key.
	// +kubebuilder:validation:MaxItems=32
	// +optional
	Items []KeyToPath `json:"items,omitempty"`
	// DefaultMode is the files' mode, 0 to 0777 (decimal in JSON and
	// YAML); unset, 0644.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=511
	// +optional
	DefaultMode *int32 `json:"defaultMode,omitempty"`
}

// KeyToPath puts one key at a relative path of the volume.
type KeyToPath struct {
	// Key is the Secret's or ConfigMap's key.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	// +required
	Key string `json:"key"`
	// Path is the file's path in the volume: relative, without '..'.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('/') && !self.split('/').exists(s, s == '..' || s == '' || s == '.')",message="path must be relative, without '.', '..' or empty segments"
	// +required
	Path string `json:"path"`
	// Mode is this file's mode, 0 to 0777 (decimal); unset, defaultMode.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=511
	// +optional
	Mode *int32 `json:"mode,omitempty"`
}

// EmptyDirVolume is an instance's scratch directory.
type EmptyDirVolume struct {
	// Medium is "" (the node's disk) or Memory (a tmpfs, counted against
	// the instance's memory limit).
	// +kubebuilder:validation:Enum="";Memory
	// +optional
	Medium corev1.StorageMedium `json:"medium,omitempty"`
	// SizeLimit caps what the directory holds; past it the instance is
	// evicted on a cluster.
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self > 0 : (isQuantity(self) && quantity(self).isGreaterThan(quantity('0')))",message="sizeLimit must be a quantity greater than zero, such as 100Mi"
	// +optional
	SizeLimit *resource.Quantity `json:"sizeLimit,omitempty"`
}

// PVCVolume mounts a PersistentVolumeClaim of the function's namespace.
type PVCVolume struct {
	// ClaimName is the claim.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +required
	ClaimName string `json:"claimName"`
	// ReadOnly mounts the claim read-only. A writable claim needs Knative's
	// kubernetes.podspec-persistent-volume-write feature as well.
	// +optional
	ReadOnly bool `json:"readOnly,omitempty"`
}
