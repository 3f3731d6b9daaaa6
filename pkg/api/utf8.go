package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"strings"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// checkJSONCharset refuses a JSON body declared in a charset other than
// UTF-8: JSON exchanged between systems is UTF-8 (RFC 8259 8.1), and a body
// in, say, ISO-8859-1 would be read as UTF-8 and its non-ASCII text lost.
func checkJSONCharset(contentType string) *Problem {
	if contentType == "" {
		return nil
	}
	_, params, err := mime.ParseMediaType(contentType)
	if err != nil {
		return unsupportedMediaType("the Content-Type %q does not parse: %v", contentType, err)
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") && !strings.EqualFold(cs, "utf8") {
		return unsupportedMediaType("JSON bodies are UTF-8 (RFC 8259), not charset %q: send the body encoded as UTF-8", cs)
	}
	return nil
}

// jsonText is body without a leading UTF-8 byte order mark, which RFC 8259
// 8.1 lets a parser ignore and some editors and Windows PowerShell write;
// the JSON decoder would refuse it as "invalid character 'ï'". A body in
// UTF-16 or UTF-32, told by its byte order mark or the NUL bytes of its
// first character, is refused saying so.
func jsonText(body []byte) ([]byte, *Problem) {
	if b, ok := bytes.CutPrefix(body, []byte{0xef, 0xbb, 0xbf}); ok {
		return b, nil
	}
	if len(body) >= 2 && (body[0] == 0 || body[1] == 0 || (body[0] == 0xff && body[1] == 0xfe) || (body[0] == 0xfe && body[1] == 0xff)) {
		return nil, badRequest("the body is UTF-16 or UTF-32; JSON text is UTF-8 (RFC 8259): send it encoded as UTF-8").
			naming("body", field.ErrorTypeInvalid, "not UTF-8")
	}
	return body, nil
}

// checkUTF8 refuses JSON whose strings are not valid Unicode: bytes that are
// not UTF-8, or \u escapes of lone UTF-16 surrogates. The JSON decoder would
// replace each with U+FFFD without a word, so a Function's inline code or an
// environment value would be stored other than sent. The problem names the
// field the string is in, or is a key of.
func checkUTF8(body []byte) *Problem {
	if utf8.Valid(body) && !bytes.Contains(body, []byte(`\u`)) {
		return nil
	}
	type frame struct {
		path    *field.Path
		array   bool
		index   int
		key     string
		wantKey bool
	}
	var stack []frame
	// at is the path of the value about to be read.
	at := func() *field.Path {
		if len(stack) == 0 {
			return nil
		}
		f := &stack[len(stack)-1]
		if f.array {
			return indexed(f.path, f.index)
		}
		return child(f.path, f.key)
	}
	// done moves past a complete value.
	done := func() {
		if len(stack) == 0 {
			return
		}
		f := &stack[len(stack)-1]
		if f.array {
			f.index++
		} else {
			f.wantKey = true
		}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	for {
		start := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			// The end, or a syntax error the strict decoder reports.
			return nil
		}
		raw := body[start:dec.InputOffset()]
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{':
				stack = append(stack, frame{path: at(), wantKey: true})
			case '[':
				stack = append(stack, frame{path: at(), array: true})
			default:
				stack = stack[:len(stack)-1]
				done()
			}
		case string:
			isKey := len(stack) > 0 && !stack[len(stack)-1].array && stack[len(stack)-1].wantKey
			where := at()
			if isKey {
				f := &stack[len(stack)-1]
				f.key, f.wantKey = t, false
				where = child(f.path, t)
			}
			if msg := badString(raw, t); msg != "" {
				if isKey {
					msg = "the key: " + msg
				}
				offset := start + int64(bytes.IndexByte(raw, '"'))
				e := field.Invalid(where, field.OmitValueType{}, fmt.Sprintf("%s (the string at byte %d); JSON text is UTF-8 (RFC 8259)", msg, offset))
				if where == nil {
					e = field.Invalid(field.NewPath("body"), field.OmitValueType{}, e.Detail)
				}
				return invalid("The request", field.ErrorList{e})
			}
			if !isKey {
				done()
			}
		default:
			done()
		}
	}
}

// badString tells what is wrong with a JSON string token, given its raw text
// and its decoded value: "" when it decoded to what was sent.
func badString(raw []byte, decoded string) string {
	if !utf8.Valid(raw) {
		return "not valid UTF-8"
	}
	// Every U+FFFD in the value must have been sent as one, literally or
	// as an escape; any other is a lone surrogate the decoder replaced.
	sent := strings.Count(string(raw), "\uFFFD") + strings.Count(strings.ToLower(string(raw)), `\ufffd`)
	if strings.Count(decoded, "\uFFFD") > sent {
		return `a \u escape of a lone UTF-16 surrogate (\ud800-\udfff without its pair)`
	}
	return ""
}

func child(p *field.Path, name string) *field.Path {
	if p == nil {
		return field.NewPath(name)
	}
	// Map keys (labels, annotations, inline files) read as the apiserver
	// writes them: metadata.labels[app].
	switch p.String() {
	case "metadata.labels", "metadata.annotations", "spec.source.inline.files":
		return p.Key(name)
	}
	return p.Child(name)
}

func indexed(p *field.Path, i int) *field.Path {
	if p == nil {
		return field.NewPath("body").Index(i)
	}
	return p.Index(i)
}
