package serving

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/local/proc"
)

// ReasonVolumeNotSupported: the spec mounts what one machine has no
// counterpart of (a PersistentVolumeClaim).
const ReasonVolumeNotSupported = "VolumeNotSupported"

// Kinds of object a volume's files come from, as ResolveFiles takes them.
const (
	FilesSecret    = "Secret"
	FilesConfigMap = "ConfigMap"
)

// CheckLocalVolumes refuses what local mode cannot mount: a
// PersistentVolumeClaim, which names storage of a cluster. The REST API
// of sless dev refuses it on write; a revision of one stored earlier fails
// with this message.
func CheckLocalVolumes(vols []slessv1alpha1.Volume) (index int, msg string) {
	for i, v := range vols {
		if v.PersistentVolumeClaim != nil {
			return i, fmt.Sprintf("volume %s mounts PersistentVolumeClaim %s: local mode has no PersistentVolumeClaims; "+
				"use an emptyDir here, or deploy the function to a cluster", v.Name, v.PersistentVolumeClaim.ClaimName)
		}
	}
	return -1, ""
}

// Unsupported is CheckLocalVolumes as the REST API's admission takes it
// (api.Options.Unsupported): a PersistentVolumeClaim refused on write.
func Unsupported(w slessv1alpha1.Workload) *field.Error {
	i, msg := CheckLocalVolumes(w.BuildSpec().Volumes)
	if msg == "" {
		return nil
	}
	return field.Forbidden(field.NewPath("spec", "volumes").Index(i).Child("persistentVolumeClaim"), msg)
}

// volumeSeq tells apart the volume directories of instances.
var volumeSeq atomic.Uint64

// instanceVolumes are the files of one instance's Secret and ConfigMap
// volumes, under dir, and the mounts that show them at their paths.
type instanceVolumes struct {
	// mu keeps a refresh from writing files again into a removed dir.
	mu      sync.Mutex
	removed bool
	dir     string
	vols    []slessv1alpha1.Volume
	mounts  []proc.Mount
}

// prepareVolumes writes the instance's Secret and ConfigMap files under a
// directory of its own and says what to mount where: those read-only, an
// emptyDir as a tmpfs (of its sizeLimit, which the kernel then enforces)
// or a directory of its own.
func (s *Server) prepareVolumes(ctx context.Context, ns, revision string, vols []slessv1alpha1.Volume) (*instanceVolumes, error) {
	if len(vols) == 0 {
		return nil, nil
	}
	if s.opts.VolumeDir == "" {
		return nil, fmt.Errorf("volumes need a directory of the server's (VolumeDir)")
	}
	iv := &instanceVolumes{vols: vols,
		dir: filepath.Join(s.opts.VolumeDir, ns, revision+"-"+strconv.FormatUint(volumeSeq.Add(1), 10))}
	if err := os.MkdirAll(iv.dir, 0o700); err != nil {
		return nil, err
	}
	for _, v := range vols {
		src := filepath.Join(iv.dir, v.Name)
		m := proc.Mount{Target: v.MountPath}
		switch {
		case v.Secret != nil || v.ConfigMap != nil:
			if err := s.writeVolumeFiles(ctx, ns, src, &v); err != nil {
				iv.remove()
				return nil, err
			}
			m.Source, m.ReadOnly = src, true
		case v.EmptyDir != nil && (v.EmptyDir.SizeLimit != nil || v.EmptyDir.Medium == "Memory"):
			if v.EmptyDir.SizeLimit != nil {
				m.TmpfsBytes = v.EmptyDir.SizeLimit.Value()
			}
		case v.EmptyDir != nil:
			if err := os.Mkdir(src, 0o700); err != nil {
				iv.remove()
				return nil, err
			}
			m.Source = src
		default:
			_, msg := CheckLocalVolumes([]slessv1alpha1.Volume{v})
			iv.remove()
			return nil, fmt.Errorf("%s", msg)
		}
		iv.mounts = append(iv.mounts, m)
	}
	return iv, nil
}

func (iv *instanceVolumes) procMounts() []proc.Mount {
	if iv == nil {
		return nil
	}
	return iv.mounts
}

// RefreshVolumes writes again the files the running instances of namespace
// ns show of the Secret or ConfigMap (kind FilesSecret or FilesConfigMap)
// name: a rotation reaches them without a restart, as on a cluster.
func (s *Server) RefreshVolumes(ctx context.Context, ns, kind, name string) error {
	s.procMu.Lock()
	var insts []*instance
	for inst := range s.procs {
		if inst.ns == ns && inst.volumes != nil {
			insts = append(insts, inst)
		}
	}
	s.procMu.Unlock()
	var errs []error
	for _, inst := range insts {
		if err := s.refreshVolumes(ctx, ns, inst.volumes, kind, name); err != nil {
			errs = append(errs, fmt.Errorf("revision %s: %w", inst.revision, err))
		}
	}
	return errors.Join(errs...)
}

func (iv *instanceVolumes) remove() {
	if iv != nil {
		iv.mu.Lock()
		defer iv.mu.Unlock()
		iv.removed = true
		_ = os.RemoveAll(iv.dir)
	}
}

// refresh writes again the files of iv's volumes of kind name, as the
// kubelet does when a Secret or ConfigMap changes.
func (s *Server) refreshVolumes(ctx context.Context, ns string, iv *instanceVolumes, kind, name string) error {
	iv.mu.Lock()
	defer iv.mu.Unlock()
	if iv.removed {
		return nil
	}
	for _, v := range iv.vols {
		if (kind == FilesSecret && v.Secret != nil && v.Secret.SecretName == name) ||
			(kind == FilesConfigMap && v.ConfigMap != nil && v.ConfigMap.Name == name) {
			if err := s.writeVolumeFiles(ctx, ns, filepath.Join(iv.dir, v.Name), &v); err != nil {
				return fmt.Errorf("volume %s: %w", v.Name, err)
			}
		}
	}
	return nil
}

// writeVolumeFiles lays out v's keys in dir as the kubelet does: the files
// in a directory named for the time, a ..data link to it and a link per
// entry through ..data, so a change swaps ..data at once and a reader never
// sees half of it.
func (s *Server) writeVolumeFiles(ctx context.Context, ns, dir string, v *slessv1alpha1.Volume) error {
	if s.opts.ResolveFiles == nil {
		return fmt.Errorf("volume %s: Secrets and ConfigMaps as files are not available here", v.Name)
	}
	kind, name, items, mode := FilesSecret, "", []slessv1alpha1.KeyToPath(nil), int32(0o644)
	if sv := v.Secret; sv != nil {
		name, items = sv.SecretName, sv.Items
		if sv.DefaultMode != nil {
			mode = *sv.DefaultMode
		}
	} else {
		kind, name, items = FilesConfigMap, v.ConfigMap.Name, v.ConfigMap.Items
		if v.ConfigMap.DefaultMode != nil {
			mode = *v.ConfigMap.DefaultMode
		}
	}
	data, err := s.opts.ResolveFiles(ctx, ns, kind, name)
	if err != nil {
		return fmt.Errorf("volume %s: %w", v.Name, err)
	}
	type file struct {
		path string
		mode int32
		data []byte
	}
	var files []file
	if len(items) == 0 {
		for k, b := range data {
			files = append(files, file{k, mode, b})
		}
	}
	for _, it := range items {
		b, ok := data[it.Key]
		if !ok {
			return fmt.Errorf("volume %s: %s %s has no key %s", v.Name, strings.ToLower(kind), name, it.Key)
		}
		m := mode
		if it.Mode != nil {
			m = *it.Mode
		}
		files = append(files, file{it.Path, m, b})
	}
	sort.Slice(files, func(i, j int) bool { return files[i].path < files[j].path })
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	stamp := ".." + time.Now().UTC().Format("2006_01_02_15_04_05.000000000")
	gen := filepath.Join(dir, stamp)
	if err := os.Mkdir(gen, 0o755); err != nil {
		return err
	}
	top := map[string]bool{}
	for _, f := range files {
		p := filepath.Join(gen, filepath.FromSlash(f.path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, f.data, os.FileMode(f.mode)); err != nil {
			return err
		}
		if err := os.Chmod(p, os.FileMode(f.mode)); err != nil {
			return err
		}
		top[strings.SplitN(f.path, "/", 2)[0]] = true
	}
	// Swap ..data to the new files, then link each entry through it.
	tmp := filepath.Join(dir, "..data_tmp")
	_ = os.Remove(tmp)
	if err := os.Symlink(stamp, tmp); err != nil {
		return err
	}
	old, _ := os.Readlink(filepath.Join(dir, "..data"))
	if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
		return err
	}
	for name := range top {
		link := filepath.Join(dir, name)
		if _, err := os.Lstat(link); err == nil {
			continue
		}
		if err := os.Symlink(filepath.Join("..data", name), link); err != nil {
			return err
		}
	}
	// Entries the new data lacks go, as does the old generation.
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if n := e.Name(); !strings.HasPrefix(n, "..") && !top[n] {
			_ = os.Remove(filepath.Join(dir, n))
		}
	}
	if old != "" && old != stamp {
		_ = os.RemoveAll(filepath.Join(dir, old))
	}
	return nil
}
