package source

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io/fs"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// zentry describes one entry of a test archive. Fields left zero take the
// honest value.
type zentry struct {
	name    string
	data    []byte
	store   bool        // zip.Store instead of zip.Deflate
	mode    fs.FileMode // 0: a regular 0644 file
	rawMode uint32      // when set, written as is into the external attributes
	// lie about sizes: when set, the header declares this instead.
	declaredSize *uint64
	flags        uint16 // general purpose flags, written as is
}

func u64(n uint64) *uint64 { return &n }

func makeZip(t testing.TB, entries ...zentry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range entries {
		method := zip.Deflate
		if e.store || strings.HasSuffix(e.name, "/") {
			method = zip.Store
		}
		h := &zip.FileHeader{Name: e.name, Method: method, Flags: e.flags}
		switch {
		case e.rawMode != 0:
			h.CreatorVersion = 3 << 8 // Unix
			h.ExternalAttrs = e.rawMode << 16
		case e.mode != 0:
			h.SetMode(e.mode)
		default:
			h.SetMode(0o644)
		}
		if strings.HasSuffix(e.name, "/") {
			if _, err := zw.CreateHeader(h); err != nil {
				t.Fatal(err)
			}
			continue
		}
		var comp []byte
		if method == zip.Deflate {
			var cb bytes.Buffer
			fw, _ := flate.NewWriter(&cb, flate.BestCompression)
			fw.Write(e.data)
			fw.Close()
			comp = cb.Bytes()
		} else {
			comp = e.data
		}
		h.CRC32 = crc32.ChecksumIEEE(e.data)
		h.CompressedSize64 = uint64(len(comp))
		h.UncompressedSize64 = uint64(len(e.data))
		if e.declaredSize != nil {
			h.UncompressedSize64 = *e.declaredSize
		}
		w, err := zw.CreateRaw(h)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(comp); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func file(name, content string) zentry { return zentry{name: name, data: []byte(content)} }

// overlappingZip has two central-directory entries pointing at the same
// local header and data: the overlap trick of non-recursive zip bombs.
func overlappingZip(t testing.TB) []byte {
	b := makeZip(t, file("a.txt", "same"), file("b.txt", "same"))
	cd := bytes.LastIndex(b, []byte{'P', 'K', 1, 2})
	if cd < 0 {
		t.Fatal("no second central directory header")
	}
	binary.LittleEndian.PutUint32(b[cd+42:], 0) // local header offset of b.txt -> a.txt's
	return b
}

// corruptStored flips one byte of a stored entry's data so its CRC fails.
func corruptStored(t testing.TB) []byte {
	b := makeZip(t, zentry{name: "x.txt", data: []byte("hello, checksum"), store: true})
	i := bytes.Index(b, []byte("hello, checksum"))
	b[i] ^= 0xff
	return b
}

func TestReadZipRejects(t *testing.T) {
	zeros := make([]byte, 4<<20)
	small := Limits{MaxEntries: 3, MaxUncompressed: 100}
	tests := []struct {
		name   string
		zip    []byte
		lim    Limits
		reason string
		path   string
	}{
		{"not a zip", []byte("this is not a zip archive at all"), DefaultLimits, ReasonBadArchive, ""},
		{"truncated", makeZip(t, file("a.py", "x"))[:30], DefaultLimits, ReasonBadArchive, ""},
		{"empty archive", makeZip(t), DefaultLimits, ReasonEmpty, ""},
		{"zero bytes", []byte{}, DefaultLimits, ReasonEmpty, ""},
		{"only directories", makeZip(t, zentry{name: "a/"}, zentry{name: "a/b/"}), DefaultLimits, ReasonEmpty, ""},
		{"ratio bomb", makeZip(t, zentry{name: "bomb.bin", data: zeros}), DefaultLimits, ReasonZipBomb, "bomb.bin"},
		{"declared ratio bomb", makeZip(t, zentry{name: "b.bin", data: []byte("tiny"), declaredSize: u64(200 << 20)}), DefaultLimits, ReasonZipBomb, "b.bin"},
		{"header declares less than the data", makeZip(t, zentry{name: "liar.txt", data: bytes.Repeat([]byte("abc"), 1000), declaredSize: u64(10)}), DefaultLimits, ReasonSizeMismatch, "liar.txt"},
		{"header declares more than the data", makeZip(t, zentry{name: "short.txt", data: []byte("abc"), declaredSize: u64(3000)}), DefaultLimits, ReasonSizeMismatch, "short.txt"},
		{"overlapping entries", overlappingZip(t), DefaultLimits, ReasonZipBomb, ""},
		{"checksum mismatch", corruptStored(t), DefaultLimits, ReasonBadArchive, "x.txt"},
		{"encrypted entry", makeZip(t, file("main.py", "x"), zentry{name: "secret.py", data: []byte("0123456789ab-cipher"), store: true, flags: 0x1}), DefaultLimits, ReasonEncrypted, "secret.py"},
		{"strongly encrypted entry", makeZip(t, zentry{name: "secret.py", data: []byte("cipher"), flags: 0x41}), DefaultLimits, ReasonEncrypted, "secret.py"},
		{"dot-dot", makeZip(t, file("../evil.py", "x")), DefaultLimits, ReasonPathTraversal, "../evil.py"},
		{"dot-dot inside", makeZip(t, file("a/../../evil.py", "x")), DefaultLimits, ReasonPathTraversal, "a/../../evil.py"},
		{"dot-dot that stays inside", makeZip(t, file("a/../b.py", "x")), DefaultLimits, ReasonPathTraversal, "a/../b.py"},
		{"absolute", makeZip(t, file("/etc/passwd", "x")), DefaultLimits, ReasonAbsolutePath, "/etc/passwd"},
		{"drive letter", makeZip(t, file("C:/windows/x.py", "x")), DefaultLimits, ReasonAbsolutePath, "C:/windows/x.py"},
		{"backslash", makeZip(t, file(`..\evil.py`, "x")), DefaultLimits, ReasonBadPath, `..\evil.py`},
		{"control character", makeZip(t, file("a\nb.py", "x")), DefaultLimits, ReasonBadPath, "a\nb.py"},
		{"marked UTF-8 but not", makeZip(t, zentry{name: "caf\x82.py", data: []byte("x"), flags: 0x800}), DefaultLimits, ReasonBadPath, "caf\x82.py"},
		{"symlink by external attrs", makeZip(t, zentry{name: "link", data: []byte("/etc/passwd"), rawMode: 0o120777}), DefaultLimits, ReasonSymlink, "link"},
		{"symlink by mode", makeZip(t, zentry{name: "link2", data: []byte("../x"), mode: fs.ModeSymlink | 0o777}), DefaultLimits, ReasonSymlink, "link2"},
		{"character device", makeZip(t, zentry{name: "tty", data: []byte{}, rawMode: 0o020666}), DefaultLimits, ReasonNotRegular, "tty"},
		{"named pipe", makeZip(t, zentry{name: "fifo", data: []byte{}, rawMode: 0o010644}), DefaultLimits, ReasonNotRegular, "fifo"},
		{"duplicate", makeZip(t, file("main.py", "a"), file("main.py", "b")), DefaultLimits, ReasonDuplicate, "main.py"},
		{"duplicate after cleaning", makeZip(t, file("a/b.py", "a"), file("a//./b.py", "b")), DefaultLimits, ReasonDuplicate, "a//./b.py"},
		{"file and directory", makeZip(t, file("a", "a"), file("a/b.py", "b")), DefaultLimits, ReasonDuplicate, "a/b.py"},
		{"directory then file", makeZip(t, zentry{name: "lib/"}, file("lib", "b")), DefaultLimits, ReasonDuplicate, "lib"},
		{"too many entries", makeZip(t, file("1", ""), file("2", ""), file("3", ""), file("4", "")), small, ReasonTooManyEntries, ""},
		{"too large uncompressed", makeZip(t, file("a", strings.Repeat("x", 60)), file("b", strings.Repeat("y", 60))), small, ReasonTooLarge, "b"},
		{"too large compressed", makeZip(t, file("a", "x")), Limits{MaxCompressed: 10}, ReasonTooLarge, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			files, err := ReadZip(bytes.NewReader(tc.zip), int64(len(tc.zip)), tc.lim)
			if err == nil {
				t.Fatalf("accepted, got %d files", len(files))
			}
			var se *Error
			if !errors.As(err, &se) {
				t.Fatalf("error %v is a %T, want *source.Error", err, err)
			}
			if se.Reason != tc.reason {
				t.Fatalf("reason %q (%v), want %q", se.Reason, err, tc.reason)
			}
			if tc.path != "" && se.Path != tc.path {
				t.Fatalf("path %q, want %q", se.Path, tc.path)
			}
			if se.Message == "" {
				t.Fatal("empty message")
			}
		})
	}
}

// TestReadZipNamesOtherFormats: an archive of another kind, uploaded where a
// zip belongs, is refused saying what it is; before, the answer was only
// "zip: not a valid zip file".
func TestReadZipNamesOtherFormats(t *testing.T) {
	var tarBuf bytes.Buffer
	tw := tar.NewWriter(&tarBuf)
	if err := tw.WriteHeader(&tar.Header{Name: "main.py", Mode: 0o644, Size: 1}); err != nil {
		t.Fatal(err)
	}
	tw.Write([]byte("x"))
	tw.Close()
	var gzBuf bytes.Buffer
	zw := gzip.NewWriter(&gzBuf)
	zw.Write(tarBuf.Bytes())
	zw.Close()
	for _, tc := range []struct {
		name string
		data []byte
		says string
	}{
		{"tar.gz", gzBuf.Bytes(), "a gzip file (a .tar.gz?), not a zip archive"},
		{"tar", tarBuf.Bytes(), "a tar archive, not a zip archive"},
		{"7z", []byte("7z\xbc\xaf\x27\x1c\x00\x04 and more of it"), "a 7z archive, not a zip archive"},
		{"xz", []byte("\xfd7zXZ\x00 and more of it"), "an xz file (a .tar.xz?)"},
		{"text", []byte("def handler(e, c):\n    return 1\n"), "not a readable zip archive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadZip(bytes.NewReader(tc.data), int64(len(tc.data)), DefaultLimits)
			var se *Error
			if !errors.As(err, &se) || se.Reason != ReasonBadArchive || !strings.Contains(se.Message, tc.says) {
				t.Fatalf("error %v, want %s saying %q", err, ReasonBadArchive, tc.says)
			}
		})
	}
}

// TestReadZipManyEntriesCheap: an archive of more entries than the limit is
// refused from the count its end record declares, before archive/zip makes a
// record of each; before, 200,000 empty entries cost some 45 MiB to refuse.
func TestReadZipManyEntriesCheap(t *testing.T) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	const entries = 200000
	for i := range entries {
		if _, err := zw.CreateRaw(&zip.FileHeader{Name: strconv.FormatInt(int64(i), 36), Method: zip.Store}); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := ReadZip(bytes.NewReader(data), int64(len(data)), DefaultLimits)
	runtime.ReadMemStats(&after)
	var se *Error
	if !errors.As(err, &se) || se.Reason != ReasonTooManyEntries || !strings.Contains(se.Message, strconv.Itoa(entries)) {
		t.Fatalf("error %v, want %s naming %d", err, ReasonTooManyEntries, entries)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20 {
		t.Fatalf("refusing %d entries allocated %d KiB", entries, alloc>>10)
	}
	// A zip64 archive declares its count in the zip64 record.
	var big bytes.Buffer
	zw = zip.NewWriter(&big)
	for i := range 70000 { // past 0xffff: written as zip64
		if _, err := zw.CreateRaw(&zip.FileHeader{Name: strconv.Itoa(i), Method: zip.Store}); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if n, ok := declaredEntries(bytes.NewReader(big.Bytes()), int64(big.Len())); !ok || n != 70000 {
		t.Fatalf("zip64 archive declares %d entries (%v), want 70000", n, ok)
	}
}

func TestReadZipAccepts(t *testing.T) {
	repetitive := strings.Repeat("a", 1<<20) // at the ratio threshold, not over it
	tests := []struct {
		name string
		zip  []byte
		want Files
	}{
		{"one file", makeZip(t, file("main.py", "def handler(e, c): return 1\n")),
			Files{"main.py": []byte("def handler(e, c): return 1\n")}},
		{"directories skipped, nesting kept", makeZip(t,
			zentry{name: "pkg/"}, zentry{name: "pkg/sub/"},
			file("pkg/__init__.py", ""), file("pkg/sub/mod.py", "x = 1\n"), file("requirements.txt", "six\n")),
			Files{"pkg/__init__.py": {}, "pkg/sub/mod.py": []byte("x = 1\n"), "requirements.txt": []byte("six\n")}},
		{"dot prefix cleaned", makeZip(t, file("./index.js", "module.exports = {}")),
			Files{"index.js": []byte("module.exports = {}")}},
		{"stored entries", makeZip(t, zentry{name: "a.bin", data: []byte{0, 1, 2, 255}, store: true}),
			Files{"a.bin": {0, 1, 2, 255}}},
		{"executable file", makeZip(t, zentry{name: "run.sh", data: []byte("#!/bin/sh\n"), mode: 0o755}),
			Files{"run.sh": []byte("#!/bin/sh\n")}},
		{"small repetitive file", makeZip(t, file("big.txt", repetitive)),
			Files{"big.txt": []byte(repetitive)}},
		{"unicode names", makeZip(t, file("données/é.txt", "ok")),
			Files{"données/é.txt": []byte("ok")}},
		{"code page 437 names, as Windows writes them", makeZip(t, zentry{name: "donn\x82es/caf\x82.py", data: []byte("ok")}),
			Files{"données/café.py": []byte("ok")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadZip(bytes.NewReader(tc.zip), int64(len(tc.zip)), DefaultLimits)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got files %v, want %v", got.Names(), tc.want.Names())
			}
			for name, data := range tc.want {
				if !bytes.Equal(got[name], data) {
					t.Errorf("%s: got %q, want %q", name, got[name], data)
				}
			}
		})
	}
}

func TestZeroLimitsMeanDefaults(t *testing.T) {
	z := makeZip(t, file("a.py", "x"))
	if _, err := ReadZip(bytes.NewReader(z), int64(len(z)), Limits{}); err != nil {
		t.Fatal(err)
	}
}

func TestErrorIsSizeLimit(t *testing.T) {
	for reason, want := range map[string]bool{
		ReasonTooLarge: true, ReasonTooManyEntries: true, ReasonZipBomb: true,
		ReasonPathTraversal: false, ReasonBadArchive: false, ReasonEntrypointMissing: false,
	} {
		if got := (&Error{Reason: reason}).IsSizeLimit(); got != want {
			t.Errorf("%s: IsSizeLimit %v, want %v", reason, got, want)
		}
	}
}

func FuzzReadZip(f *testing.F) {
	f.Add(makeZip(f, file("main.py", "def handler(e, c):\n    return e\n"), file("lib/x.py", "")))
	f.Add(makeZip(f, zentry{name: "d/"}, zentry{name: "d/a", data: []byte("aaaa"), store: true}))
	f.Add(makeZip(f, zentry{name: "liar", data: []byte("abcabcabc"), declaredSize: u64(2)}))
	f.Add(overlappingZip(f))
	f.Add(corruptStored(f))
	f.Add([]byte("PK\x05\x06" + strings.Repeat("\x00", 18)))
	f.Fuzz(func(t *testing.T, b []byte) {
		lim := Limits{MaxCompressed: 1 << 20, MaxUncompressed: 1 << 20, MaxEntries: 100}
		files, err := ReadZip(bytes.NewReader(b), int64(len(b)), lim)
		if err != nil {
			var se *Error
			if !errors.As(err, &se) || se.Reason == "" {
				t.Fatalf("error %v is not a *source.Error with a reason", err)
			}
			return
		}
		if len(files) == 0 {
			t.Fatal("accepted an archive with no files")
		}
		if files.Size() > lim.MaxUncompressed {
			t.Fatalf("accepted %d bytes over the limit", files.Size())
		}
		for name := range files {
			if name == "" || strings.HasPrefix(name, "/") || strings.Contains(name, `\`) ||
				strings.Contains("/"+name+"/", "/../") || strings.Contains("/"+name+"/", "/./") || strings.HasSuffix(name, "/") {
				t.Fatalf("accepted unclean path %q", name)
			}
		}
	})
}
