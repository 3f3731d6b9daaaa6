package v1alpha1

import (
	"fmt"
	"path"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The runtime's own paths, as the CRD's mountPath rule lists them. A mount
// may not be or lie under ReservedMountRoots: the code and wrapper
// (/sless) and the kernel's filesystems. It may not be or contain
// RuntimePaths either: the interpreters, their libraries, the CA
// certificates and the name-resolution files every runtime image reads.
var (
	ReservedMountRoots = []string{"/sless", "/dev", "/proc", "/sys"}
	RuntimePaths       = []string{"/usr/local/bin", "/usr/local/lib", "/usr/bin", "/usr/lib", "/bin", "/lib", "/lib64", "/sbin",
		"/etc/ssl", "/etc/hosts", "/etc/resolv.conf"}
)

var configKeyRE = regexp.MustCompile(`^[-._a-zA-Z0-9]+$`)

const (
	msgOneSource   = "a volume takes exactly one of secret, configMap, emptyDir or persistentVolumeClaim"
	msgMountPath   = "mountPath must be an absolute, clean path other than /, such as /etc/app"
	msgRuntimePath = "mountPath must not cover the runtime's own paths: /sless, /dev, /proc, /sys and what is under them, or the interpreter's and system libraries' directories (/usr/local/bin, /usr/lib, /etc/ssl, …) or a parent of them"
	msgOverlap     = "volumes' mount paths must not overlap: none may be another's or under it"
	msgItemPath    = "path must be relative, without '.', '..' or empty segments"
	msgSizeLimit   = "sizeLimit must be a quantity greater than zero, such as 100Mi"
)

// CheckMountPath says what is wrong with p as a volume's mount path, "" when nothing.
func CheckMountPath(p string) string {
	if len(p) > MaxMountPathLength {
		return fmt.Sprintf("mountPath must be at most %d characters", MaxMountPathLength)
	}
	if !strings.HasPrefix(p, "/") || p == "/" || path.Clean(p) != p {
		return msgMountPath
	}
	for _, r := range ReservedMountRoots {
		if under(p, r) {
			return msgRuntimePath
		}
	}
	for _, r := range RuntimePaths {
		if under(r, p) {
			return msgRuntimePath
		}
	}
	return ""
}

// under tells whether p is dir or a path inside it.
func under(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

// ValidateVolumes checks volumes as the CRD rules check spec.volumes, at p
// (sless.yaml's volumes take the same).
func ValidateVolumes(vols []Volume, p *field.Path) field.ErrorList { return validateVolumes(vols, p) }

func validateVolumes(vols []Volume, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(vols) > MaxVolumes {
		errs = append(errs, field.TooMany(p, len(vols), MaxVolumes))
	}
	names := map[string]bool{}
	for i, v := range vols {
		vp := p.Index(i)
		switch {
		case v.Name == "":
			errs = append(errs, field.Required(vp.Child("name"), ""))
		case len(v.Name) > 63 || !labelNameRE.MatchString(v.Name):
			errs = append(errs, field.Invalid(vp.Child("name"), v.Name, "a volume's name must be a DNS-1123 label: lower-case letters, digits and '-'"))
		case names[v.Name]:
			errs = append(errs, field.Duplicate(vp, map[string]string{"name": v.Name}))
		}
		names[v.Name] = true
		if msg := CheckMountPath(v.MountPath); msg != "" {
			errs = append(errs, field.Invalid(vp.Child("mountPath"), v.MountPath, msg))
		} else {
			for j, w := range vols {
				if j != i && (under(v.MountPath, w.MountPath) || under(w.MountPath, v.MountPath)) {
					errs = append(errs, field.Invalid(vp.Child("mountPath"), v.MountPath, fmt.Sprintf("%s; %s is %s", msgOverlap, p.Index(j).Child("mountPath"), w.MountPath)))
					break
				}
			}
		}
		n := 0
		for _, set := range []bool{v.Secret != nil, v.ConfigMap != nil, v.EmptyDir != nil, v.PersistentVolumeClaim != nil} {
			if set {
				n++
			}
		}
		if n != 1 {
			errs = append(errs, field.Invalid(vp, v.Name, msgOneSource))
		}
		if s := v.Secret; s != nil {
			sp := vp.Child("secret")
			errs = append(errs, objectName(sp.Child("secretName"), s.SecretName, "Secret")...)
			errs = append(errs, validateItems(s.Items, s.DefaultMode, sp)...)
		}
		if c := v.ConfigMap; c != nil {
			cp := vp.Child("configMap")
			errs = append(errs, objectName(cp.Child("name"), c.Name, "ConfigMap")...)
			errs = append(errs, validateItems(c.Items, c.DefaultMode, cp)...)
		}
		if e := v.EmptyDir; e != nil {
			ep := vp.Child("emptyDir")
			if e.Medium != "" && e.Medium != "Memory" {
				errs = append(errs, field.NotSupported(ep.Child("medium"), e.Medium, []string{`""`, "Memory"}))
			}
			if e.SizeLimit != nil && e.SizeLimit.Sign() <= 0 {
				errs = append(errs, field.Invalid(ep.Child("sizeLimit"), e.SizeLimit.String(), msgSizeLimit))
			}
		}
		if c := v.PersistentVolumeClaim; c != nil {
			errs = append(errs, objectName(vp.Child("persistentVolumeClaim", "claimName"), c.ClaimName, "PersistentVolumeClaim")...)
		}
	}
	return errs
}

func objectName(p *field.Path, name, kind string) field.ErrorList {
	switch {
	case name == "":
		return field.ErrorList{field.Required(p, "must name a "+kind)}
	case len(name) > 253 || !subdomainRE.MatchString(name):
		return field.ErrorList{field.Invalid(p, name, "must name a "+kind+": a DNS-1123 subdomain of lower-case letters, digits, '-' and '.'")}
	}
	return nil
}

func validateItems(items []KeyToPath, defaultMode *int32, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, fileMode(p.Child("defaultMode"), defaultMode)...)
	ip := p.Child("items")
	if len(items) > MaxVolumeItems {
		errs = append(errs, field.TooMany(ip, len(items), MaxVolumeItems))
	}
	for i, it := range items {
		kp := ip.Index(i)
		switch {
		case it.Key == "":
			errs = append(errs, field.Required(kp.Child("key"), ""))
		case len(it.Key) > 253 || !configKeyRE.MatchString(it.Key):
			errs = append(errs, field.Invalid(kp.Child("key"), it.Key, "keys are letters, digits, '-', '_' and '.'"))
		}
		switch {
		case it.Path == "":
			errs = append(errs, field.Required(kp.Child("path"), ""))
		case len(it.Path) > 253:
			errs = append(errs, field.TooLong(kp.Child("path"), it.Path, 253))
		case strings.HasPrefix(it.Path, "/") || hasBadSegment(it.Path):
			errs = append(errs, field.Invalid(kp.Child("path"), it.Path, msgItemPath))
		}
		errs = append(errs, fileMode(kp.Child("mode"), it.Mode)...)
	}
	return errs
}

func hasBadSegment(p string) bool {
	for _, s := range strings.Split(p, "/") {
		if s == "" || s == "." || s == ".." {
			return true
		}
	}
	return false
}

func fileMode(p *field.Path, m *int32) field.ErrorList {
	if m == nil || (*m >= 0 && *m <= MaxFileMode) {
		return nil
	}
	return field.ErrorList{field.Invalid(p, *m, "must be between 0 and 511 (0777 in octal)")}
}

// Kind names v's source as its field does: "secret", "configMap",
// "emptyDir" or "persistentVolumeClaim".
func (v *Volume) Kind() string {
	switch {
	case v.Secret != nil:
		return "secret"
	case v.ConfigMap != nil:
		return "configMap"
	case v.EmptyDir != nil:
		return "emptyDir"
	case v.PersistentVolumeClaim != nil:
		return "persistentVolumeClaim"
	}
	return ""
}
