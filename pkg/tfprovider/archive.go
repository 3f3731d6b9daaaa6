package tfprovider

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/sless-dev/sless/pkg/source"
)

// archive is a function's source as the provider uploads it.
type archive struct {
	Zip []byte
	// SHA256 is the lower-case hex digest of Zip: what state keeps and what
	// the API records in spec.source.archive.sha256.
	SHA256 string
	// Files are the zip's files as the API will read them.
	Files source.Files
}

// skippedDirs are never zipped from a source_dir: tool state and dependency
// directories the builder makes itself. Keeping them out keeps the digest of
// an unchanged directory stable across local runs.
var skippedDirs = map[string]bool{".git": true, ".terraform": true, "__pycache__": true, "node_modules": true}

// zipEpoch is the modification time of every entry (the earliest a zip's DOS
// time can say), so a zip depends on contents only.
var zipEpoch = time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)

// zipDir zips the regular files under dir deterministically: sorted paths,
// fixed times, no extra fields, deflate at a fixed level, and of a file's
// mode only whether it is executable (0755, else 0644): the API builds a
// file with an execute bit executable, so a script the function runs must
// keep it, while other bits (a 0600 or 0664 file, the umask) must not move
// the digest. The same contents and execute bits give the same bytes (and
// sha256) on every run.
func zipDir(dir string) (*archive, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%s is not a directory", dir)
	}
	files, modes := source.Files{}, source.Modes{}
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if rel == "." {
			return nil
		}
		switch {
		case d.IsDir():
			if skippedDirs[d.Name()] {
				return filepath.SkipDir
			}
			return nil
		case d.Type()&fs.ModeSymlink != 0:
			return fmt.Errorf("%s is a symbolic link; sless takes regular files only", rel)
		case !d.Type().IsRegular():
			return fmt.Errorf("%s is not a regular file", rel)
		case strings.HasSuffix(rel, ".pyc"):
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files[rel] = b
		if info.Mode().Perm()&0o111 != 0 {
			modes[rel] = 0o755
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s holds no files", dir)
	}
	return zipModes(files, modes)
}

// zipFiles writes files (inline ones, which have no modes) as a
// deterministic zip of 0644 entries and checks it as the API will.
func zipFiles(files source.Files) (*archive, error) {
	return zipModes(files, nil)
}

// zipModes is zipFiles with a file that has an execute bit in modes 0755.
func zipModes(files source.Files, modes source.Modes) (*archive, error) {
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	w.RegisterCompressor(zip.Deflate, func(out io.Writer) (io.WriteCloser, error) {
		return flate.NewWriter(out, flate.BestCompression)
	})
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		// Modified stays zero so Go writes no extended timestamp field: the
		// entry holds only the fixed DOS date.
		h := &zip.FileHeader{Name: n, Method: zip.Deflate, ModifiedDate: dosDate(zipEpoch)}
		mode := fs.FileMode(0o644)
		if modes[n]&0o111 != 0 {
			mode = 0o755
		}
		h.SetMode(mode)
		fw, err := w.CreateHeader(h)
		if err != nil {
			return nil, err
		}
		if _, err := fw.Write(files[n]); err != nil {
			return nil, err
		}
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return readArchive(buf.Bytes())
}

func dosDate(t time.Time) uint16 {
	return uint16(t.Day() + int(t.Month())<<5 + (t.Year()-1980)<<9)
}

// readZipFile reads a user's zip as it is: its bytes are what is uploaded.
func readZipFile(p string) (*archive, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	return readArchive(b)
}

// readArchive checks a zip with the same limits and rules the API applies to
// an upload, so a bad archive fails at plan rather than at apply.
func readArchive(b []byte) (*archive, error) {
	files, err := source.ReadZip(bytes.NewReader(b), int64(len(b)), source.Limits{})
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(b)
	return &archive{Zip: b, SHA256: hex.EncodeToString(sum[:]), Files: files}, nil
}
