package serving

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/local/localtest"
	"github.com/sless-dev/sless/pkg/secrets/sealed"
)

// With SealState the kept revision's env, which holds values resolved from
// secrets, is not on disk in the clear, and a restart still serves it.
func TestServerStateSealed(t *testing.T) {
	const value = "resolved-from-a-secret-8fK2"
	dir := t.TempDir()
	state := filepath.Join(dir, "serving")
	sealer, err := sealed.LoadKey(filepath.Join(dir, "secrets.key"))
	if err != nil {
		t.Fatal(err)
	}
	bed := newServerBedWith(t, time.Minute, func(o *ServerOptions) {
		o.StateDir = state
		o.SealState = func(k types.NamespacedName, b []byte) []byte { return sealer.SealFile(k.String(), b) }
		o.OpenState = func(k types.NamespacedName, b []byte) ([]byte, error) { return sealer.OpenFile(k.String(), b) }
	})
	fn := localtest.FunctionNamed("ns", "keeper")
	fn.Generation = 1
	fn.Spec.Env = []slessv1alpha1.EnvVar{{Name: "GREETING", Value: value}}
	bed.awaitState(fn, bed.image(fn, replyCode("kept")), ready)
	raw, err := os.ReadFile(filepath.Join(state, "ns", "keeper.json"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte(value)) || bytes.HasPrefix(raw, []byte("{")) {
		t.Fatalf("the state file is in the clear: %q", raw)
	}
	bed.restart()
	if rev, _, ok := bed.server.Serving("ns", "keeper"); !ok || rev != "keeper-00001" {
		t.Fatalf("after restart: serving %q ok=%v", rev, ok)
	}
	body, _, err := bed.call("ns", "keeper")
	if err != nil || !strings.Contains(body, value) {
		t.Fatalf("after restart: %s %v", body, err)
	}
}
