package source

import (
	"archive/tar"
	"bytes"
	"io/fs"
	"maps"
	"reflect"
	"testing"
)

// A script or helper binary shipped in a zip with an execute bit is
// executable (0755) in the build context, which kaniko copies into the
// image and local mode unpacks; before, every file was 0644 and running it
// failed with "permission denied". Only whether a file is executable is
// kept: never setuid, setgid or sticky, and never a mode the function's
// user could not read (a 0600 file is 0644, a 0700 directory 0755).
func TestZipModesReachTheBuildContext(t *testing.T) {
	z := makeZip(t,
		file("main.py", "def handler(event, context):\n    return 1\n"),
		zentry{name: "bin/run.sh", data: []byte("#!/bin/sh\necho hi\n"), mode: 0o755},
		zentry{name: "bin/tool", data: []byte("\x7fELF tool"), rawMode: 0o104755}, // a regular file, setuid
		zentry{name: "bin/group-only", data: []byte("#!/bin/sh\n"), rawMode: 0o100710},
		zentry{name: "secret.txt", data: []byte("s"), mode: 0o600},
		zentry{name: "data/", mode: fs.ModeDir | 0o700},
		file("data/table.csv", "a,b\n"),
	)
	files, modes, err := ReadZipModes(bytes.NewReader(z), int64(len(z)), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	wantModes := Modes{"bin/run.sh": 0o755, "bin/tool": 0o755, "bin/group-only": 0o710, "secret.txt": 0o600}
	if !maps.Equal(modes, wantModes) {
		t.Fatalf("modes %v, want %v", modes, wantModes)
	}
	if plain, err := ReadZip(bytes.NewReader(z), int64(len(z)), Limits{}); err != nil || !maps.EqualFunc(plain, files, bytes.Equal) {
		t.Fatalf("ReadZip gives other files than ReadZipModes: %v", err)
	}

	in := Input{Runtime: "python3.12", Entrypoint: "main.handler", Files: files, Modes: modes}
	c, err := BuildContext(in)
	if err != nil {
		t.Fatal(err)
	}
	hs, contents := readContext(t, c.TarGz)
	want := map[string]int64{
		"function/bin/run.sh": 0o755, "function/bin/tool": 0o755, "function/bin/group-only": 0o755,
		"function/secret.txt": 0o644, "function/main.py": 0o644, "function/data/table.csv": 0o644,
		"function/": 0o755, "function/bin/": 0o755, "function/data/": 0o755,
	}
	got := map[string]int64{}
	for _, h := range hs {
		if h.Mode&^0o777 != 0 {
			t.Errorf("%s: mode %o has bits beyond the permissions", h.Name, h.Mode)
		}
		if _, ok := want[h.Name]; ok {
			got[h.Name] = h.Mode
		} else if h.Typeflag == tar.TypeReg && h.Mode != 0o644 {
			t.Errorf("%s (not the function's): mode %o, want 644", h.Name, h.Mode)
		}
	}
	if !maps.Equal(got, want) {
		t.Errorf("modes in the context %v, want %v", got, want)
	}
	if contents["function/bin/run.sh"] != "#!/bin/sh\necho hi\n" {
		t.Errorf("run.sh = %q", contents["function/bin/run.sh"])
	}

	// The modes are all that changes: without them the same files give the
	// same entries and contents with 0644 everywhere, and a context with
	// no executable file is the one made before modes were read.
	plain, err := BuildContext(Input{Runtime: in.Runtime, Entrypoint: in.Entrypoint, Files: files})
	if err != nil {
		t.Fatal(err)
	}
	if plain.Digest == c.Digest {
		t.Error("the executable files did not change the digest")
	}
	phs, pcontents := readContext(t, plain.TarGz)
	if len(phs) != len(hs) || !maps.Equal(pcontents, contents) {
		t.Fatalf("without modes the context has other entries or contents")
	}
	for i := range hs {
		a, b := *hs[i], *phs[i]
		a.Mode, b.Mode = 0, 0
		if !reflect.DeepEqual(a, b) {
			t.Errorf("entry %d differs beyond its mode: %+v and %+v", i, hs[i], phs[i])
		}
	}
	noExec := maps.Clone(modes)
	delete(noExec, "bin/run.sh")
	delete(noExec, "bin/tool")
	delete(noExec, "bin/group-only")
	same, err := BuildContext(Input{Runtime: in.Runtime, Entrypoint: in.Entrypoint, Files: files, Modes: noExec})
	if err != nil {
		t.Fatal(err)
	}
	if same.Digest != plain.Digest {
		t.Errorf("modes without an execute bit changed the digest: %s, want %s", same.Digest, plain.Digest)
	}
}
