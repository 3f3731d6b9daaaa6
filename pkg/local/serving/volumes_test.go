package serving

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/local/localtest"
	"github.com/sless-dev/sless/pkg/local/proc"
)

// A function reads a Secret's and a ConfigMap's keys as files at their
// mount paths, writes to an emptyDir held to its sizeLimit, and sees a
// rotated Secret's new value without a restart, as on a cluster.
func TestServerMountsVolumes(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("mount namespaces without root need unprivileged user namespaces; run as root")
	}
	var mu sync.Mutex
	objects := map[string]map[string][]byte{
		"Secret/db":     {"password": []byte("first")},
		"ConfigMap/app": {"mode": []byte("fast"), "other": []byte("x")},
	}
	bed := newServerBedWith(t, time.Minute, func(o *ServerOptions) {
		sup, err := proc.NewSupervisor(t.TempDir(), proc.SupervisorOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sup.Close() })
		o.Procs = sup
		o.VolumeDir = filepath.Join(t.TempDir(), "volumes")
		o.ResolveFiles = func(_ context.Context, ns, kind, name string) (map[string][]byte, error) {
			mu.Lock()
			defer mu.Unlock()
			return objects[kind+"/"+name], nil
		}
	})
	fn := localtest.FunctionNamed("ns", "vols")
	fn.Generation = 1
	fn.Spec.Volumes = []slessv1alpha1.Volume{
		{Name: "db", MountPath: "/etc/sless-vol-test/db", Secret: &slessv1alpha1.SecretVolume{SecretName: "db", DefaultMode: ptr.To[int32](0o440)}},
		{Name: "app", MountPath: "/etc/sless-vol-test/app", ConfigMap: &slessv1alpha1.ConfigMapVolume{Name: "app",
			Items: []slessv1alpha1.KeyToPath{{Key: "mode", Path: "conf/mode"}}}},
		{Name: "scratch", MountPath: "/sless-vol-test-scratch", EmptyDir: &slessv1alpha1.EmptyDirVolume{SizeLimit: ptr.To(resource.MustParse("64Ki"))}},
	}
	code := `import os, stat
def handler(event, context):
    out = {'password': open('/etc/sless-vol-test/db/password').read(),
           'mode': open('/etc/sless-vol-test/app/conf/mode').read(),
           'other': os.path.exists('/etc/sless-vol-test/app/other'),
           'perm': oct(stat.S_IMODE(os.stat('/etc/sless-vol-test/db/password').st_mode))}
    try:
        open('/etc/sless-vol-test/db/x', 'w')
        out['secretWritable'] = True
    except OSError:
        out['secretWritable'] = False
    with open('/sless-vol-test-scratch/small', 'wb') as f:
        f.write(b'x' * 4096)
    try:
        with open('/sless-vol-test-scratch/big', 'wb') as f:
            f.write(b'x' * (128 << 10))
        out['overLimit'] = 'written'
    except OSError as e:
        out['overLimit'] = e.strerror
    return out
`
	img := bed.image(fn, code)
	bed.awaitState(fn, img, ready)
	read := func() map[string]any {
		t.Helper()
		reply, _, err := bed.call("ns", "vols")
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]any
		if err := json.Unmarshal([]byte(reply), &got); err != nil {
			t.Fatalf("%v: %s", err, reply)
		}
		return got
	}
	got := read()
	want := map[string]any{"password": "first", "mode": "fast", "other": false, "perm": "0o440", "secretWritable": false, "overLimit": "No space left on device"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
	for _, p := range []string{"/etc/sless-vol-test", "/sless-vol-test-scratch"} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s was made on the machine", p)
		}
	}

	// Rotation: the running process reads the new value.
	pids := bed.server.Processes("ns", "vols")
	mu.Lock()
	objects["Secret/db"] = map[string][]byte{"password": []byte("second")}
	mu.Unlock()
	if err := bed.server.RefreshVolumes(context.Background(), "ns", FilesSecret, "db"); err != nil {
		t.Fatal(err)
	}
	if got := read(); got["password"] != "second" {
		t.Errorf("after rotation password = %v, want second", got["password"])
	}
	if now := bed.server.Processes("ns", "vols"); fmt.Sprint(now) != fmt.Sprint(pids) {
		t.Errorf("rotation restarted the process: %v, then %v", pids, now)
	}

	// The instance's files go with it.
	bed.server.Remove("ns", "vols")
	awaitNoProcesses(t, bed.server, "ns", "vols", 10*time.Second)
	if left, _ := os.ReadDir(filepath.Join(bed.opts.VolumeDir, "ns")); len(left) != 0 {
		t.Errorf("volume files left after the process: %v", left)
	}
}
