package source

import (
	"archive/zip"
	"bufio"
	"bytes"
	"compress/flate"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// IgnoreFile names, in the directory packed, the patterns it leaves out.
const IgnoreFile = ".slessignore"

// ManifestFile is the CLI's description of a function; it is never uploaded.
const ManifestFile = "sless.yaml"

// DefaultIgnores are never packed: tool state, caches, the dependencies the
// build installs itself, and sless's own files. A pattern without a slash
// matches a base name at any depth.
var DefaultIgnores = []string{
	".git", ".hg", ".svn", ".terraform", ".DS_Store",
	"__pycache__", "*.pyc", ".venv", "venv", "node_modules",
	ManifestFile, IgnoreFile,
}

// packEpoch is every entry's modification time (the earliest a zip's DOS
// date can say), so a zip depends on contents only.
var packEpoch = time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)

// Packed is a directory as sless uploads it.
type Packed struct {
	Zip []byte
	// SHA256 is the lower-case hex digest of Zip, as the API records it in
	// spec.source.archive.sha256.
	SHA256 string
	// Files is how many files Zip holds.
	Files int
}

// PackDir zips the files of dir the one way the CLI, the Terraform provider
// and sless dev's deploy tool all upload code: DefaultIgnores and
// dir/.slessignore left out, sorted paths, fixed times and modes (see Zip),
// so the same directory always gives the same bytes and sha256.
//
// A symbolic link to a file inside dir is packed as a copy of that file at
// the link's path; a link to a directory, a dangling link and a link leading
// out of dir are refused, since what they hold is not the directory's code.
func PackDir(dir string) (*Packed, error) {
	files, modes, err := ReadDir(dir)
	if err != nil {
		return nil, err
	}
	z, err := Zip(files, modes)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(z)
	return &Packed{Zip: z, SHA256: hex.EncodeToString(sum[:]), Files: len(files)}, nil
}

// ReadDir reads the files PackDir packs, with an executable's mode 0755.
func ReadDir(dir string) (Files, Modes, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, nil, err
	}
	if !st.IsDir() {
		return nil, nil, fmt.Errorf("%s is not a directory", dir)
	}
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, nil, err
	}
	ignores, err := readIgnores(dir)
	if err != nil {
		return nil, nil, err
	}
	files, modes := Files{}, Modes{}
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		if ignored(ignores, rel, d.Name()) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		if d.Type()&fs.ModeSymlink != 0 {
			if p, err = linkTarget(root, p, rel); err != nil {
				return err
			}
		} else if !d.Type().IsRegular() {
			return fmt.Errorf("%s is not a regular file", rel)
		}
		info, err := os.Stat(p)
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
		return nil, nil, fmt.Errorf("packing %s: %w", dir, err)
	}
	if len(files) == 0 {
		return nil, nil, fmt.Errorf("%s holds no files to pack", dir)
	}
	return files, modes, nil
}

// linkTarget resolves the link at p (rel in the directory whose real path
// is root) to the file it names, refusing what is not a file inside root.
func linkTarget(root, p, rel string) (string, error) {
	target, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", fmt.Errorf("%s is a symbolic link that leads nowhere: %w", rel, err)
	}
	in, err := filepath.Rel(root, target)
	if err != nil || in == ".." || strings.HasPrefix(in, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("%s is a symbolic link to %s, outside the directory; copy the file in instead", rel, target)
	}
	st, err := os.Stat(target)
	if err != nil {
		return "", err
	}
	if !st.Mode().IsRegular() {
		return "", fmt.Errorf("%s is a symbolic link to %s, not to a file; sless packs links to files only", rel, filepath.ToSlash(in))
	}
	return target, nil
}

// Zip writes files as a deterministic zip: sorted paths, fixed times, no
// extra fields, deflate at a fixed level, and of a mode only whether the
// file is executable (0755, else 0644). The API builds a file with an
// execute bit executable, so a script must keep it, while other bits (a 0600
// file, the umask) must not move the digest.
func Zip(files Files, modes Modes) ([]byte, error) {
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	w.RegisterCompressor(zip.Deflate, func(out io.Writer) (io.WriteCloser, error) {
		return flate.NewWriter(out, flate.BestCompression)
	})
	for _, n := range files.Names() {
		// Modified stays zero so Go writes no extended timestamp field: the
		// entry holds only the fixed DOS date.
		h := &zip.FileHeader{Name: n, Method: zip.Deflate, ModifiedDate: dosDate(packEpoch)}
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
			return nil, fmt.Errorf("zipping %s: %w", n, err)
		}
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func dosDate(t time.Time) uint16 {
	return uint16(t.Day() + int(t.Month())<<5 + (t.Year()-1980)<<9)
}

// readIgnores is DefaultIgnores and dir/.slessignore's patterns, one a line
// as in .gitignore, without negation.
func readIgnores(dir string) ([]string, error) {
	pats := append([]string(nil), DefaultIgnores...)
	f, err := os.Open(filepath.Join(dir, IgnoreFile))
	if errors.Is(err, os.ErrNotExist) {
		return pats, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		p := strings.TrimSpace(sc.Text())
		if p == "" || strings.HasPrefix(p, "#") {
			continue
		}
		if strings.HasPrefix(p, "!") {
			return nil, fmt.Errorf("%s:%d: negated patterns (%q) are not supported", IgnoreFile, line, p)
		}
		p = strings.Trim(p, "/")
		if _, err := path.Match(p, ""); err != nil {
			return nil, fmt.Errorf("%s:%d: bad pattern %q: %w", IgnoreFile, line, p, err)
		}
		pats = append(pats, p)
	}
	return pats, sc.Err()
}

// ignored matches a pattern with a slash against the whole relative path,
// one without against the base name at any depth (as .gitignore does).
func ignored(pats []string, rel, base string) bool {
	for _, p := range pats {
		target := base
		if strings.Contains(p, "/") {
			target = rel
		}
		if ok, _ := path.Match(p, target); ok {
			return true
		}
	}
	return false
}
