// Package source turns what a user hands sless (a zip archive or inline files)
// into validated files, and those files into a deterministic build context: a
// gzipped tar holding a generated Dockerfile, the runtime's wrapper and the
// user's code, which kaniko builds in the cluster and local mode unpacks and
// runs as a process.
//
// Everything here is pure (no storage, no network, no clock) but PackDir,
// which reads the directory a user deploys.
package source

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/encoding/charmap"
)

// Files is a function's code: slash-separated paths relative to the code root
// mapped to their contents. Paths are clean (no ".", "..", leading "/" or
// trailing "/"); directories are implied by the paths of their files. Their
// modes, where a zip gives them, are Modes.
type Files map[string][]byte

// Modes are the permission bits (fs.FileMode.Perm: never setuid, setgid or
// sticky) of a function's files by path, as a zip's entries give them. A
// file with an execute bit is built executable (see BuildContext); a path
// not in Modes is an ordinary file.
type Modes map[string]fs.FileMode

// Inline turns the inline files of a Function spec into Files.
func Inline(files map[string]string) Files {
	out := make(Files, len(files))
	for name, content := range files {
		out[name] = []byte(content)
	}
	return out
}

// Names returns the paths of fs in sorted order.
func (fs Files) Names() []string {
	names := make([]string, 0, len(fs))
	for name := range fs {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// Size is the total number of content bytes in fs.
func (fs Files) Size() int64 {
	var n int64
	for _, b := range fs {
		n += int64(len(b))
	}
	return n
}

// Reasons an archive or a set of files is refused. They are stable machine
// codes: the REST API puts them in its problem+json bodies.
const (
	// ReasonBadArchive: not a zip, a corrupt zip, or a checksum failure.
	ReasonBadArchive = "BadArchive"
	// ReasonEmpty: the archive holds no regular file.
	ReasonEmpty = "Empty"
	// ReasonTooLarge: the archive or its uncompressed contents exceed a limit.
	ReasonTooLarge = "TooLarge"
	// ReasonTooManyEntries: more entries than Limits.MaxEntries.
	ReasonTooManyEntries = "TooManyEntries"
	// ReasonZipBomb: an entry inflates by more than Limits.MaxRatio, or entries
	// share compressed data.
	ReasonZipBomb = "ZipBomb"
	// ReasonSizeMismatch: an entry inflates to a size other than the one its
	// header declares.
	ReasonSizeMismatch = "SizeMismatch"
	// ReasonPathTraversal: a path with a ".." element.
	ReasonPathTraversal = "PathTraversal"
	// ReasonAbsolutePath: a path starting with "/" or a drive letter.
	ReasonAbsolutePath = "AbsolutePath"
	// ReasonBadPath: a backslash, a NUL or control character, invalid UTF-8,
	// or an empty path.
	ReasonBadPath = "BadPath"
	// ReasonEncrypted: an entry encrypted with a password (ZipCrypto or
	// stronger), which sless cannot read.
	ReasonEncrypted = "Encrypted"
	// ReasonSymlink: a symbolic link.
	ReasonSymlink = "Symlink"
	// ReasonNotRegular: a device, pipe, socket or other non-regular entry.
	ReasonNotRegular = "NotRegular"
	// ReasonDuplicate: two entries with the same cleaned path, or a path that
	// is both a file and a directory.
	ReasonDuplicate = "Duplicate"
	// ReasonUnknownRuntime: a runtime name sless does not know.
	ReasonUnknownRuntime = "UnknownRuntime"
	// ReasonBadEntrypoint: an entrypoint that does not have the runtime's form.
	ReasonBadEntrypoint = "BadEntrypoint"
	// ReasonEntrypointMissing: the entrypoint names a file that is not there.
	ReasonEntrypointMissing = "EntrypointMissing"
)

// Error is why source was refused. Reason is one of the Reason constants,
// Path the offending entry (empty when the whole input is at fault).
type Error struct {
	Reason  string
	Path    string
	Message string
}

func (e *Error) Error() string {
	if e.Path != "" {
		return fmt.Sprintf("%s: %s: %s", e.Reason, e.Path, e.Message)
	}
	return fmt.Sprintf("%s: %s", e.Reason, e.Message)
}

// IsSizeLimit tells whether the error is about size (an HTTP 413) rather than
// about the content being malformed (an HTTP 400).
func (e *Error) IsSizeLimit() bool {
	switch e.Reason {
	case ReasonTooLarge, ReasonTooManyEntries, ReasonZipBomb:
		return true
	}
	return false
}

func newError(reason, p, format string, args ...any) *Error {
	return &Error{Reason: reason, Path: p, Message: fmt.Sprintf(format, args...)}
}

// Limits bound what ReadZip accepts. A zero field takes DefaultLimits' value.
type Limits struct {
	// MaxCompressed is the largest archive, in bytes.
	MaxCompressed int64
	// MaxUncompressed is the largest total of all entries once inflated.
	MaxUncompressed int64
	// MaxEntries is the most entries (files and directories) in the archive.
	MaxEntries int
	// MaxRatio is the largest uncompressed:compressed ratio of one entry
	// larger than RatioMinSize.
	MaxRatio int64
	// RatioMinSize is the uncompressed size from which MaxRatio applies:
	// small, highly repetitive files are normal.
	RatioMinSize int64
}

// DefaultLimits are the limits of an uploaded function archive.
var DefaultLimits = Limits{
	MaxCompressed:   64 << 20,
	MaxUncompressed: 256 << 20,
	MaxEntries:      10000,
	MaxRatio:        100,
	RatioMinSize:    1 << 20,
}

func (l Limits) withDefaults() Limits {
	if l.MaxCompressed <= 0 {
		l.MaxCompressed = DefaultLimits.MaxCompressed
	}
	if l.MaxUncompressed <= 0 {
		l.MaxUncompressed = DefaultLimits.MaxUncompressed
	}
	if l.MaxEntries <= 0 {
		l.MaxEntries = DefaultLimits.MaxEntries
	}
	if l.MaxRatio <= 0 {
		l.MaxRatio = DefaultLimits.MaxRatio
	}
	if l.RatioMinSize <= 0 {
		l.RatioMinSize = DefaultLimits.RatioMinSize
	}
	return l
}

// ReadZip validates a zip archive and returns its regular files, without
// their modes (see ReadZipModes).
func ReadZip(r io.ReaderAt, size int64, lim Limits) (Files, error) {
	files, _, err := ReadZipModes(r, size, lim)
	return files, err
}

// ReadZipModes validates a zip archive and returns its regular files and
// their permission bits, from the entries' Unix attributes (a zip made
// on Windows has none: its files are ordinary). Nothing in the archive is
// trusted: sizes are counted while inflating, never taken from headers, and
// every limit is checked before more memory is spent. Directory entries are
// skipped. Every refusal is an *Error.
func ReadZipModes(r io.ReaderAt, size int64, lim Limits) (Files, Modes, error) {
	modes := Modes{}
	files, err := readZip(r, size, lim, modes)
	if err != nil {
		return nil, nil, err
	}
	return files, modes, nil
}

// readZip is ReadZipModes, recording the files' modes in modes.
func readZip(r io.ReaderAt, size int64, lim Limits, modes Modes) (Files, error) {
	lim = lim.withDefaults()
	if size > lim.MaxCompressed {
		return nil, newError(ReasonTooLarge, "", "archive is %d bytes, the limit is %d", size, lim.MaxCompressed)
	}
	if size <= 0 {
		return nil, newError(ReasonEmpty, "", "archive is empty")
	}
	// archive/zip builds a record of every entry before anything can be
	// checked: about 230 bytes each, so a 64 MiB archive of 750,000 empty
	// entries cost 170 MiB. The count the archive's end record declares is
	// read first.
	if n, ok := declaredEntries(r, size); ok && n > uint64(lim.MaxEntries) {
		return nil, newError(ReasonTooManyEntries, "", "archive declares %d entries, the limit is %d", n, lim.MaxEntries)
	}
	zr, err := zip.NewReader(r, size)
	if err != nil && !errors.Is(err, zip.ErrInsecurePath) {
		if other := sniffArchive(r, size); other != "" {
			return nil, newError(ReasonBadArchive, "", "this is %s, not a zip archive: upload the code as a zip", other)
		}
		return nil, newError(ReasonBadArchive, "", "not a readable zip archive: %v", err)
	}
	if len(zr.File) > lim.MaxEntries {
		return nil, newError(ReasonTooManyEntries, "", "archive has %d entries, the limit is %d", len(zr.File), lim.MaxEntries)
	}

	// First pass: names, modes and declared sizes only, so a hostile archive
	// is refused before anything is inflated.
	type entry struct {
		f    *zip.File
		name string
	}
	entries := make([]entry, 0, len(zr.File))
	seen := make(map[string]string, len(zr.File)) // cleaned name -> "file" | "dir"
	var declared uint64
	for _, f := range zr.File {
		// A name not marked UTF-8 is in the zip's original code page, IBM
		// 437 (APPNOTE 4.4.4, appendix D), as Windows' own zip writes it:
		// café.py arrives as caf\x82.py. One that reads as UTF-8 anyway is
		// taken as UTF-8, as most tools that do not set the flag write it.
		if f.Flags&zipFlagUTF8 == 0 && !utf8.ValidString(f.Name) {
			f.Name = decodeCP437(f.Name)
		}
		name, isDir, perr := cleanEntryName(f.Name)
		if perr != nil {
			return nil, perr
		}
		// Read as if it were not encrypted, an entry inflates to noise or
		// fails its size or checksum check: say what it is instead.
		if f.Flags&(zipFlagEncrypted|zipFlagStrongEncryption) != 0 {
			return nil, newError(ReasonEncrypted, f.Name, "the entry is encrypted: make the zip without a password")
		}
		mode := f.Mode()
		if mode&fs.ModeSymlink != 0 {
			return nil, newError(ReasonSymlink, f.Name, "symbolic links are not allowed")
		}
		if mode.IsDir() {
			isDir = true
		} else if !mode.IsRegular() {
			return nil, newError(ReasonNotRegular, f.Name, "only regular files and directories are allowed (mode %v)", mode)
		}
		if isDir {
			if err := markDir(seen, name, f.Name); err != nil {
				return nil, err
			}
			continue
		}
		if kind, ok := seen[name]; ok {
			return nil, newError(ReasonDuplicate, f.Name, "%q appears twice (as a %s before)", name, kind)
		}
		if err := markDir(seen, path.Dir(name), f.Name); err != nil {
			return nil, err
		}
		seen[name] = "file"
		// Only the permission bits: setuid, setgid and sticky are other
		// bits of an fs.FileMode, and never kept.
		if perm := mode.Perm(); perm != 0o644 {
			modes[name] = perm
		}
		if f.UncompressedSize64 > uint64(lim.MaxUncompressed) || declared+f.UncompressedSize64 > uint64(lim.MaxUncompressed) {
			return nil, newError(ReasonTooLarge, f.Name, "uncompressed contents exceed %d bytes", lim.MaxUncompressed)
		}
		declared += f.UncompressedSize64
		if err := checkRatio(f.Name, f.UncompressedSize64, f.CompressedSize64, lim); err != nil {
			return nil, err
		}
		entries = append(entries, entry{f: f, name: name})
	}
	if len(entries) == 0 {
		return nil, newError(ReasonEmpty, "", "archive holds no files")
	}
	if err := checkOverlap(zr.File, size); err != nil {
		return nil, err
	}

	// Second pass: inflate, counting every byte against the declared size and
	// the remaining budget.
	files := make(Files, len(entries))
	var total int64
	for _, e := range entries {
		data, err := inflate(e.f, lim.MaxUncompressed-total)
		if err != nil {
			return nil, err
		}
		total += int64(len(data))
		files[e.name] = data
	}
	return files, nil
}

// General purpose flags of a zip entry (APPNOTE 4.4.4).
const (
	zipFlagEncrypted        = 0x1
	zipFlagStrongEncryption = 0x40
	zipFlagUTF8             = 0x800
)

// decodeCP437 turns a name in IBM code page 437 into UTF-8.
func decodeCP437(name string) string {
	out, err := charmap.CodePage437.NewDecoder().String(name)
	if err != nil {
		return name // every byte has a character in 437: not reached
	}
	return out
}

// declaredEntries reads the entry count of a zip's end of central directory
// record (or of its zip64 record), without reading the directory. ok is
// false when there is no such record; zip.NewReader then says what is wrong.
func declaredEntries(r io.ReaderAt, size int64) (n uint64, ok bool) {
	const eocdLen, zip64LocatorLen = 22, 20
	// The record ends the archive, after a comment of at most 65535 bytes.
	tail := min(size, eocdLen+65535)
	buf := make([]byte, tail)
	if _, err := r.ReadAt(buf, size-tail); err != nil && err != io.EOF {
		return 0, false
	}
	// The last signature is the record archive/zip reads too.
	i := bytes.LastIndex(buf, []byte("PK\x05\x06"))
	if i < 0 || len(buf)-i < eocdLen {
		return 0, false
	}
	n = uint64(binary.LittleEndian.Uint16(buf[i+10:]))
	if n != 0xffff {
		return n, true
	}
	// zip64: a locator just before the record points at the zip64 record.
	loc := i - zip64LocatorLen
	if loc < 0 || !bytes.Equal(buf[loc:loc+4], []byte("PK\x06\x07")) {
		return n, true
	}
	off := int64(binary.LittleEndian.Uint64(buf[loc+8:]))
	rec := make([]byte, 56)
	if off < 0 || off > size-56 {
		return 0, false
	}
	if _, err := r.ReadAt(rec, off); err != nil || !bytes.Equal(rec[:4], []byte("PK\x06\x06")) {
		return 0, false
	}
	return binary.LittleEndian.Uint64(rec[32:]), true
}

// sniffArchive names the kind of archive or compressed file r holds when it
// is one of the common ones people upload instead of a zip, else "".
func sniffArchive(r io.ReaderAt, size int64) string {
	head := make([]byte, 262)
	n, _ := r.ReadAt(head, 0)
	head = head[:n]
	switch {
	case bytes.HasPrefix(head, []byte{0x1f, 0x8b}):
		return "a gzip file (a .tar.gz?)"
	case bytes.HasPrefix(head, []byte("BZh")):
		return "a bzip2 file (a .tar.bz2?)"
	case bytes.HasPrefix(head, []byte{0xfd, '7', 'z', 'X', 'Z', 0}):
		return "an xz file (a .tar.xz?)"
	case bytes.HasPrefix(head, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		return "a zstd file (a .tar.zst?)"
	case bytes.HasPrefix(head, []byte{'7', 'z', 0xbc, 0xaf, 0x27, 0x1c}):
		return "a 7z archive"
	case bytes.HasPrefix(head, []byte("Rar!")):
		return "a RAR archive"
	case len(head) >= 262 && bytes.Equal(head[257:262], []byte("ustar")):
		return "a tar archive"
	}
	return ""
}

// markDir records dir and its parents as directories, refusing any that was
// already recorded as a file.
func markDir(seen map[string]string, dir, entryName string) error {
	for dir != "." && dir != "" {
		switch seen[dir] {
		case "dir":
			return nil
		case "file":
			return newError(ReasonDuplicate, entryName, "%q is both a file and a directory", dir)
		}
		seen[dir] = "dir"
		dir = path.Dir(dir)
	}
	return nil
}

// cleanEntryName checks a raw entry name and returns it cleaned, and whether
// it names a directory (a trailing slash).
func cleanEntryName(raw string) (string, bool, error) {
	if raw == "" {
		return "", false, newError(ReasonBadPath, raw, "empty path")
	}
	if !utf8.ValidString(raw) {
		return "", false, newError(ReasonBadPath, raw, "path is not valid UTF-8")
	}
	for _, r := range raw {
		if r < 0x20 || r == 0x7f {
			return "", false, newError(ReasonBadPath, raw, "path contains a control character")
		}
	}
	if strings.Contains(raw, `\`) {
		return "", false, newError(ReasonBadPath, raw, "path contains a backslash")
	}
	if strings.HasPrefix(raw, "/") {
		return "", false, newError(ReasonAbsolutePath, raw, "path is absolute")
	}
	if len(raw) >= 2 && raw[1] == ':' && (raw[0]|0x20 >= 'a' && raw[0]|0x20 <= 'z') {
		return "", false, newError(ReasonAbsolutePath, raw, "path starts with a drive letter")
	}
	for _, elem := range strings.Split(raw, "/") {
		if elem == ".." {
			return "", false, newError(ReasonPathTraversal, raw, "path has a '..' element")
		}
	}
	isDir := strings.HasSuffix(raw, "/")
	name := path.Clean(raw)
	if name == "." {
		if isDir {
			return ".", true, nil
		}
		return "", false, newError(ReasonBadPath, raw, "path names the archive root")
	}
	return name, isDir, nil
}

func checkRatio(name string, uncompressed, compressed uint64, lim Limits) error {
	if uncompressed <= uint64(lim.RatioMinSize) {
		return nil
	}
	if compressed == 0 || uncompressed/compressed > uint64(lim.MaxRatio) {
		return newError(ReasonZipBomb, name, "entry inflates %d bytes to %d, more than %d:1", compressed, uncompressed, lim.MaxRatio)
	}
	return nil
}

// checkOverlap refuses archives whose entries point into each other's
// compressed data: the trick that lets a small archive expand to far more
// than any one entry's ratio suggests.
func checkOverlap(files []*zip.File, size int64) error {
	type span struct {
		start, end int64
		name       string
	}
	spans := make([]span, 0, len(files))
	for _, f := range files {
		off, err := f.DataOffset()
		if err != nil {
			return newError(ReasonBadArchive, f.Name, "unreadable local header: %v", err)
		}
		end := off + int64(f.CompressedSize64)
		if f.CompressedSize64 > uint64(size) || end > size || end < off {
			return newError(ReasonBadArchive, f.Name, "entry data runs past the end of the archive")
		}
		spans = append(spans, span{off, end, f.Name})
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].start < spans[j].start })
	for i := 1; i < len(spans); i++ {
		if spans[i].start < spans[i-1].end {
			return newError(ReasonZipBomb, spans[i].name, "entry data overlaps %q", spans[i-1].name)
		}
	}
	return nil
}

// inflate reads one entry, refusing it as soon as it produces more bytes than
// it declared or than the budget allows.
func inflate(f *zip.File, budget int64) ([]byte, error) {
	declared := f.UncompressedSize64
	rc, err := f.Open()
	if err != nil {
		return nil, newError(ReasonBadArchive, f.Name, "cannot open entry: %v", err)
	}
	defer rc.Close()
	// Reading one byte past the declared size proves a lying header without
	// letting it cost more than that byte.
	limit := int64(declared) + 1
	if limit > budget+1 || limit <= 0 {
		limit = budget + 1
	}
	var buf bytes.Buffer
	if declared < 1<<20 {
		buf.Grow(int(declared))
	}
	n, err := io.Copy(&buf, io.LimitReader(rawReader{rc}, limit))
	if err != nil {
		var se *Error
		if errors.As(err, &se) {
			se.Path = f.Name
			return nil, se
		}
		if errors.Is(err, zip.ErrChecksum) {
			return nil, newError(ReasonBadArchive, f.Name, "checksum mismatch")
		}
		return nil, newError(ReasonBadArchive, f.Name, "cannot inflate entry: %v", err)
	}
	if n > budget {
		return nil, newError(ReasonTooLarge, f.Name, "uncompressed contents exceed the limit")
	}
	if uint64(n) != declared {
		return nil, newError(ReasonSizeMismatch, f.Name, "header declares %d bytes, entry holds at least %d", declared, n)
	}
	return buf.Bytes(), nil
}

// rawReader turns archive/zip's own "read more than declared" error (ErrFormat
// from its checksum reader) into a SizeMismatch, which is what it means.
type rawReader struct{ r io.Reader }

func (rr rawReader) Read(p []byte) (int, error) {
	n, err := rr.r.Read(p)
	if err != nil && (errors.Is(err, zip.ErrFormat) || errors.Is(err, io.ErrUnexpectedEOF)) {
		return n, newError(ReasonSizeMismatch, "", "entry size differs from its header")
	}
	return n, err
}
