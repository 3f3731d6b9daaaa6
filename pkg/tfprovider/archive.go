package tfprovider

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"

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

// zipDir packs dir as every sless tool does (source.PackDir) and checks the
// zip as the API will.
func zipDir(dir string) (*archive, error) {
	p, err := source.PackDir(dir)
	if err != nil {
		return nil, err
	}
	return readArchive(p.Zip)
}

// zipFiles writes files (inline ones, which have no modes) as a
// deterministic zip of 0644 entries and checks it as the API will.
func zipFiles(files source.Files) (*archive, error) {
	z, err := source.Zip(files, nil)
	if err != nil {
		return nil, err
	}
	return readArchive(z)
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
