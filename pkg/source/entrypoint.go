package source

import (
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"path"
	"regexp"
	"sort"
	"strings"

	"github.com/sless-dev/sless/runtimes"
)

var (
	pyIdent = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	jsIdent = regexp.MustCompile(`^[A-Za-z_$][A-Za-z0-9_$]*$`)
	goIdent = regexp.MustCompile(`^[A-Z][A-Za-z0-9_]*$`)
	// A path element of a Node module or Go package directory.
	pathElem = regexp.MustCompile(`^[A-Za-z0-9_@][A-Za-z0-9_.@-]*$`)
)

// Target is what an entrypoint resolves to in a function's files.
type Target struct {
	// File is the handler's source file (Python, Node) or, for Go, the
	// package directory ("." for the code root).
	File string
	// Function is the handler's name.
	Function string
}

// CheckEntrypoint checks that the entrypoint has the runtime's form and that
// the file it names is among files:
//
//   - python: "pkg.mod.func" → pkg/mod.py or pkg/mod/__init__.py, function func
//   - node: "lib/api.handle" → lib/api.js, .mjs or .cjs, export handle
//   - go: "dir/sub.Handle" → the package in directory dir/sub, function Handle;
//     a single element names a top-level directory if one holds .go files,
//     else the package at the code root whose package clause is that name
//     (so "function.Handle" for root files in package function).
func CheckEntrypoint(runtime, entrypoint string, files Files) error {
	_, err := ResolveEntrypoint(runtime, entrypoint, files)
	return err
}

// ResolveEntrypoint is CheckEntrypoint that also says what the entrypoint
// resolved to.
func ResolveEntrypoint(runtime, entrypoint string, files Files) (Target, error) {
	rt, ok := runtimes.Lookup(runtime)
	if !ok {
		return Target{}, newError(ReasonUnknownRuntime, "", "unknown runtime %q (known: %s)", runtime, strings.Join(runtimes.Names(), ", "))
	}
	dot := strings.LastIndex(entrypoint, ".")
	if dot <= 0 || dot == len(entrypoint)-1 {
		return Target{}, newError(ReasonBadEntrypoint, "", "entrypoint %q must be module.function", entrypoint)
	}
	mod, fn := entrypoint[:dot], entrypoint[dot+1:]
	var t Target
	var err error
	switch rt.Language {
	case runtimes.Python:
		t, err = resolvePython(entrypoint, mod, fn, files)
	case runtimes.Node:
		t, err = resolveNode(entrypoint, mod, fn, files)
	default:
		t, err = resolveGo(entrypoint, mod, fn, files)
	}
	var se *Error
	if errors.As(err, &se) && se.Reason == ReasonEntrypointMissing {
		if top := soleFolder(files); top != "" {
			se.Message += fmt.Sprintf("; every file sits under one folder, %s/: zip what is inside it, not the folder (cd %s && zip -r ../function.zip .)", top, top)
		}
	}
	return t, err
}

// soleFolder is the one top-level folder holding every file, if there is
// one: the usual result of zipping a folder rather than its contents.
func soleFolder(files Files) string {
	top := ""
	for p := range files {
		first, _, nested := strings.Cut(p, "/")
		if !nested || (top != "" && first != top) {
			return ""
		}
		top = first
	}
	return top
}

func resolvePython(ep, mod, fn string, files Files) (Target, error) {
	if !pyIdent.MatchString(fn) {
		return Target{}, newError(ReasonBadEntrypoint, "", "entrypoint %q: %q is not a Python function name", ep, fn)
	}
	elems := strings.Split(mod, ".")
	for _, e := range elems {
		if !pyIdent.MatchString(e) {
			return Target{}, newError(ReasonBadEntrypoint, "", "entrypoint %q: %q is not a Python module name", ep, e)
		}
	}
	base := strings.Join(elems, "/")
	for _, candidate := range []string{base + ".py", base + "/__init__.py"} {
		if _, ok := files[candidate]; ok {
			return Target{File: candidate, Function: fn}, nil
		}
	}
	return Target{}, newError(ReasonEntrypointMissing, base+".py", "entrypoint %q needs %s.py or %s/__init__.py", ep, base, base)
}

func resolveNode(ep, mod, fn string, files Files) (Target, error) {
	if !jsIdent.MatchString(fn) {
		return Target{}, newError(ReasonBadEntrypoint, "", "entrypoint %q: %q is not a JavaScript export name", ep, fn)
	}
	if err := checkRelDir(ep, mod); err != nil {
		return Target{}, err
	}
	for _, ext := range []string{".js", ".mjs", ".cjs"} {
		if _, ok := files[mod+ext]; ok {
			return Target{File: mod + ext, Function: fn}, nil
		}
	}
	return Target{}, newError(ReasonEntrypointMissing, mod+".js", "entrypoint %q needs %s.js, %s.mjs or %s.cjs", ep, mod, mod, mod)
}

func resolveGo(ep, pkg, fn string, files Files) (Target, error) {
	if !goIdent.MatchString(fn) {
		return Target{}, newError(ReasonBadEntrypoint, "", "entrypoint %q: %q is not an exported Go function name", ep, fn)
	}
	if err := checkRelDir(ep, pkg); err != nil {
		return Target{}, err
	}
	dir := pkg
	if !strings.Contains(pkg, "/") && len(goFiles(files, pkg)) == 0 {
		if name, ok := goPackageName(files, "."); ok && name == pkg {
			dir = "."
		}
	}
	srcs := goFiles(files, dir)
	if len(srcs) == 0 {
		return Target{}, newError(ReasonEntrypointMissing, pkg, "entrypoint %q: no Go package %q (a directory with .go files, or the root package's name)", ep, pkg)
	}
	if name, ok := goPackageName(files, dir); ok && name == "main" {
		return Target{}, newError(ReasonBadEntrypoint, srcs[0], "entrypoint %q: package main cannot be imported; give the handler's package another name", ep)
	}
	return Target{File: dir, Function: fn}, nil
}

func checkRelDir(ep, p string) error {
	for _, e := range strings.Split(p, "/") {
		if e == "." || e == ".." || !pathElem.MatchString(e) {
			return newError(ReasonBadEntrypoint, "", "entrypoint %q: %q is not a relative path of plain names", ep, p)
		}
	}
	return nil
}

// goFiles lists the non-test .go files directly in dir ("." for the root).
func goFiles(files Files, dir string) []string {
	var out []string
	for name := range files {
		if path.Dir(name) == dir && strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go") {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// goPackageName reads the package clause of the first parsable .go file in dir.
func goPackageName(files Files, dir string) (string, bool) {
	for _, name := range goFiles(files, dir) {
		f, err := parser.ParseFile(token.NewFileSet(), name, files[name], parser.PackageClauseOnly)
		if err == nil {
			return f.Name.Name, true
		}
	}
	return "", false
}
