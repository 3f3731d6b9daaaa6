package client

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sless-dev/sless/pkg/source"
	"github.com/sless-dev/sless/runtimes"
)

// Each starter is a folder sless deploy takes as it is.
func TestWriteStarter(t *testing.T) {
	for lang := range runtimes.Starters {
		dir := filepath.Join(t.TempDir(), "hello")
		st, err := WriteStarter(dir, lang, "hello")
		if err != nil {
			t.Fatalf("%s: %v", lang, err)
		}
		m, err := ReadManifest(dir)
		if err != nil {
			t.Fatalf("%s: %v", lang, err)
		}
		if m.Name != "hello" || m.Runtime != st.Runtime || m.Entrypoint != st.Entrypoint {
			t.Errorf("%s: sless.yaml says %+v, want hello, %s, %s", lang, m, st.Runtime, st.Entrypoint)
		}
		if err := m.Check(dir); err != nil {
			t.Errorf("%s: the manifest does not check: %v", lang, err)
		}
		for f := range st.Files {
			if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
				t.Errorf("%s: %v", lang, err)
			}
		}
		if _, err := os.Stat(filepath.Join(dir, source.IgnoreFile)); err != nil {
			t.Errorf("%s: %v", lang, err)
		}
		if _, err := WriteStarter(dir, lang, "hello"); err == nil || !strings.Contains(err.Error(), "is not empty") {
			t.Errorf("%s: a second write into the folder: %v", lang, err)
		}
	}
	if _, err := WriteStarter(t.TempDir(), "cobol", "x"); err == nil {
		t.Error("an unknown language: no error")
	}
}
