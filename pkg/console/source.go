package console

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"html/template"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/alecthomas/chroma/v2"
	chromahtml "github.com/alecthomas/chroma/v2/formatters/html"
	"github.com/alecthomas/chroma/v2/lexers"
	"github.com/alecthomas/chroma/v2/styles"

	"github.com/sless-dev/sless/pkg/adapter/s3"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/source"
)

// maxHighlighted is the largest file shown highlighted; a larger one is
// named, not shown (a browser would struggle with the page anyway).
const maxHighlighted = 512 << 10

// sourceView is a function's files, and one of them when asked for.
type sourceView struct {
	Files []fileEntry
	// Shown is the file asked for, nil when none was or it is not there.
	Shown *shownFile
	// Note says why there are no files (a prebuilt image).
	Note string
	// Error says the source could not be read.
	Error string
}

type fileEntry struct {
	Path    string
	Size    int
	Current bool
}

type shownFile struct {
	Path string
	Size int
	// HTML is the highlighted file, made by chroma, which escapes the text.
	HTML template.HTML
	// Note replaces HTML for a file that is not shown (binary, too large).
	Note string
}

// sourceOf reads fn's files: inline ones from the spec, an uploaded zip
// from the blob store. With file set, that one is highlighted too.
func (c *Console) sourceOf(ctx context.Context, fn *slessv1alpha1.Function, file string) sourceView {
	var v sourceView
	var files source.Files
	switch src := fn.Spec.Source; {
	case src.Inline != nil:
		files = source.Inline(src.Inline.Files)
	case src.Archive != nil:
		if c.opts.Blobs == nil {
			v.Note = "The source is an uploaded archive, which this server cannot read."
			return v
		}
		var err error
		if files, err = c.readArchive(ctx, src.Archive.Key); err != nil {
			c.log.Error("console: read source archive", "namespace", fn.Namespace, "function", fn.Name, "key", src.Archive.Key, "error", err)
			v.Error = "The source archive cannot be read now."
			return v
		}
	case src.Image != "":
		v.Note = "This function runs the prebuilt image " + src.Image + ": there is no source to show."
		return v
	default:
		v.Note = "This function has no source."
		return v
	}
	for p, b := range files {
		v.Files = append(v.Files, fileEntry{Path: p, Size: len(b), Current: p == file})
	}
	sort.Slice(v.Files, func(i, j int) bool { return v.Files[i].Path < v.Files[j].Path })
	if b, ok := files[file]; ok && file != "" {
		v.Shown = show(file, b)
	}
	return v
}

func (c *Console) readArchive(ctx context.Context, key string) (source.Files, error) {
	rc, _, err := c.opts.Blobs.Get(ctx, key)
	if err != nil {
		if errors.Is(err, s3.ErrNotFound) {
			return nil, fmt.Errorf("archive %s is gone: %w", key, err)
		}
		return nil, err
	}
	defer rc.Close()
	lim := c.opts.Limits
	if lim.MaxCompressed <= 0 {
		lim.MaxCompressed = source.DefaultLimits.MaxCompressed
	}
	data, err := io.ReadAll(io.LimitReader(rc, lim.MaxCompressed+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", key, err)
	}
	return source.ReadZip(bytes.NewReader(data), int64(len(data)), lim)
}

// show highlights one file. A file that is not text, or too large, is
// described instead.
func show(path string, b []byte) *shownFile {
	f := &shownFile{Path: path, Size: len(b)}
	switch {
	case len(b) > maxHighlighted:
		f.Note = fmt.Sprintf("This file is %d bytes, more than the console shows (%d).", len(b), maxHighlighted)
	case !utf8.Valid(b) || bytes.IndexByte(b, 0) >= 0:
		f.Note = fmt.Sprintf("This is a binary file of %d bytes.", len(b))
	default:
		h, err := highlight(path, string(b))
		if err != nil {
			// Plain text still shows: html/template escapes it.
			f.Note = "The file could not be highlighted."
			return f
		}
		f.HTML = h
	}
	return f
}

// formatter writes classes, never style attributes: the page's CSP
// allows styles only from the stylesheet (chromaCSS).
var formatter = chromahtml.New(chromahtml.WithClasses(true), chromahtml.WithLineNumbers(true),
	chromahtml.LineNumbersInTable(true), chromahtml.TabWidth(4))

var chromaStyle = styles.Get("github")

// highlight is the file as HTML, every character of it escaped by chroma.
func highlight(path, text string) (template.HTML, error) {
	lexer := lexers.Match(path)
	if lexer == nil {
		lexer = lexers.Analyse(text)
	}
	if lexer == nil {
		lexer = lexers.Fallback
	}
	it, err := chroma.Coalesce(lexer).Tokenise(nil, text)
	if err != nil {
		return "", err
	}
	var buf strings.Builder
	if err := formatter.Format(&buf, chromaStyle, it); err != nil {
		return "", err
	}
	return template.HTML(buf.String()), nil // #nosec: chroma escapes the text it formats
}

var chromaCSS = sync.OnceValues(func() ([]byte, error) {
	var buf bytes.Buffer
	err := formatter.WriteCSS(&buf, chromaStyle)
	return buf.Bytes(), err
})

// serveChromaCSS serves the highlighter's classes.
func (c *Console) serveChromaCSS(w http.ResponseWriter, r *http.Request) {
	css, err := chromaCSS()
	if err != nil {
		http.Error(w, "no stylesheet", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/css; charset=utf-8")
	w.Header().Set("Cache-Control", "public, max-age=3600")
	_, _ = w.Write(css)
}
