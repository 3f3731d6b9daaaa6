package cliflags

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"slices"
	"strings"
	"testing"
)

// Flags go anywhere among the positionals, as with kubectl; after "--"
// everything is positional.
func TestParseInterleaved(t *testing.T) {
	for _, tc := range []struct {
		args, pos []string
		ns        string
	}{
		{[]string{"hello", "-n", "team"}, []string{"hello"}, "team"},
		{[]string{"-n", "team", "a", "b"}, []string{"a", "b"}, "team"},
		{[]string{"a", "--", "-n", "x"}, []string{"a", "-n", "x"}, ""},
	} {
		fs := New("t", "t")
		ns := fs.String("n", "", "")
		pos, err := ParseInterleaved(fs, tc.args)
		if err != nil || !slices.Equal(pos, tc.pos) || *ns != tc.ns {
			t.Errorf("ParseInterleaved(%q) = %q, -n %q, %v; want %q, -n %q", tc.args, pos, *ns, err, tc.pos, tc.ns)
		}
	}
	if _, err := ParseInterleaved(New("t", "t"), []string{"a", "--bogus"}); err == nil || !strings.Contains(err.Error(), "-bogus") {
		t.Errorf("an unknown flag after a name: %v", err)
	}
}

func TestPositionals(t *testing.T) {
	if err := NoPositionals(New("t", "t"), nil, ""); err != nil {
		t.Errorf("none: %v", err)
	}
	if err := NoPositionals(New("t", "t"), []string{"x"}, "sless describe NAME shows one"); err == nil ||
		err.Error() != `unexpected arguments ["x"] (sless describe NAME shows one)` {
		t.Errorf("one with a hint: %v", err)
	}
	for _, tc := range []struct {
		args      []string
		name, err string
	}{
		{[]string{"db"}, "db", ""},
		{nil, "", "the secret's NAME is required"},
		{[]string{"a", "b"}, "", `one NAME, got ["a" "b"]`},
	} {
		name, err := OnePositional(New("t", "t"), tc.args, "secret")
		if name != tc.name || (err == nil) != (tc.err == "") || (err != nil && err.Error() != tc.err) {
			t.Errorf("OnePositional(%q) = %q, %v; want %q, %q", tc.args, name, err, tc.name, tc.err)
		}
	}
}

// -h prints the synopsis and the flags, and is flag.ErrHelp to the caller.
func TestHelp(t *testing.T) {
	var out bytes.Buffer
	HelpOut = &out
	defer func() { HelpOut = os.Stdout }()
	fs := New("sless t", "sless t NAME")
	fs.Bool("wait", false, "wait for it")
	if err := Parse(fs, []string{"-h"}); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v", err)
	}
	if got := out.String(); !strings.HasPrefix(got, "usage: sless t NAME\n\nflags:\n") || !strings.Contains(got, "wait for it") {
		t.Errorf("help: %q", got)
	}
	fs = New("sless t", "t")
	if err := Parse(fs, []string{"-bogus"}); err == nil || IsSet(fs, "bogus") {
		t.Errorf("an unknown flag: %v", err)
	}
}

func TestIsSetAndStringList(t *testing.T) {
	fs := New("t", "t")
	fs.String("d", "", "")
	fs.String("x", "same", "")
	var hs StringList
	fs.Var(&hs, "H", "")
	if err := Parse(fs, []string{"-d", "", "-H", "a: 1", "-H", "b: 2"}); err != nil {
		t.Fatal(err)
	}
	if !IsSet(fs, "d") || IsSet(fs, "x") {
		t.Errorf("IsSet: d %v, x %v; want an empty value given to count and a default not", IsSet(fs, "d"), IsSet(fs, "x"))
	}
	if !slices.Equal(hs, StringList{"a: 1", "b: 2"}) || hs.String() != "a: 1, b: 2" {
		t.Errorf("StringList: %q", hs)
	}
}

func TestByteSize(t *testing.T) {
	for _, tc := range []struct {
		v      string
		zeroOK bool
		want   int64
		err    string
	}{
		{"10Mi", false, 10 << 20, ""},
		{"0", true, 0, ""},
		{"0", false, 0, `--max "0": want at least 1Mi`},
		{"512Ki", false, 0, "want at least 1Mi"},
		{"0.5", false, 0, "want a whole number of bytes"},
		{"-1Mi", true, 0, "want a whole number of bytes"},
		{"1 GB", false, 0, `--max "1 GB": want a size such as`},
	} {
		got, err := ByteSize("--max", tc.v, 1<<20, tc.zeroOK)
		if got != tc.want || (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("ByteSize(%q, zeroOK %v) = %d, %v; want %d, %q", tc.v, tc.zeroOK, got, err, tc.want, tc.err)
		}
	}
}

// KEY=VALUE and KEY=PATH flags fill one map; each refusal names the flag
// and the key, and none shows a value.
func TestValues(t *testing.T) {
	const secret = "hunter2-do-not-print"
	parse := func(args ...string) *Values {
		v := &Values{
			CheckKey: func(k string) error {
				if strings.Contains(k, "/") {
					return errors.New("no slashes")
				}
				return nil
			},
			ReadFile: func(p string) ([]byte, error) {
				if p == "missing" {
					return nil, os.ErrNotExist
				}
				return []byte("from " + p), nil
			},
		}
		fs := New("t", "t")
		fs.Var(v.Literal("from-literal"), "from-literal", "")
		fs.Var(v.File("from-file"), "from-file", "")
		if err := Parse(fs, args); err != nil {
			t.Fatalf("%q: the parse failed: %v", args, err)
		}
		return v
	}
	v := parse("--from-literal", "a="+secret, "--from-file", "b=f.txt", "--from-literal", "c=")
	if v.Err != nil || len(v.Data) != 3 || string(v.Data["a"]) != secret || string(v.Data["b"]) != "from f.txt" || string(v.Data["c"]) != "" {
		t.Errorf("values: %q, %v", v.Data, v.Err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--from-literal", secret}, `--from-literal "…": want KEY=VALUE`},
		{[]string{"--from-literal", "=" + secret}, `--from-literal "=…": want KEY=VALUE`},
		{[]string{"--from-file", "nokey"}, `--from-file "…": want KEY=PATH`},
		{[]string{"--from-literal", "a/b=" + secret}, `--from-literal: key "a/b": no slashes`},
		{[]string{"--from-literal", "k=" + secret, "--from-file", "k=f"}, `--from-file: key "k" is given twice`},
		{[]string{"--from-file", "k="}, "--from-file k: no PATH after ="},
		{[]string{"--from-file", "k=missing", "--from-literal", secret}, "--from-file k: file does not exist"},
	} {
		v := parse(tc.args...)
		if v.Err == nil || v.Err.Error() != tc.want {
			t.Errorf("%q: %v, want %q", tc.args, v.Err, tc.want)
		}
		if v.Err != nil && strings.Contains(v.Err.Error(), secret) {
			t.Errorf("%q: the error shows the value: %v", tc.args, v.Err)
		}
	}
}
