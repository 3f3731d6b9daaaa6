// Package blobkey names the objects sless keeps in blob storage, so the REST
// API that writes them, the reconciler and local builder that read them (the
// names in pkg/names delegate here) and the sweep that deletes them
// agree without importing each other. Every key of a function lies under
// Prefix(ns, fn); objects are content-addressed, so a key never changes
// content and writers never race on bytes.
package blobkey

import "strings"

// Prefix is the folder of one function's objects, ending in "/".
func Prefix(ns, fn string) string { return ns + "/" + fn + "/" }

// Source is the uploaded zip whose SHA-256 is sha256hex.
func Source(ns, fn, sha256hex string) string {
	return Prefix(ns, fn) + "source/" + sha256hex + ".zip"
}

// Context is the build context (source.BuildContext's tar.gz) whose digest
// is digest, given as "sha256:<hex>" or bare hex.
func Context(ns, fn, digest string) string {
	return Prefix(ns, fn) + "context/" + strings.TrimPrefix(digest, "sha256:") + ".tar.gz"
}

// Kind of an object sless keeps.
type Kind string

const (
	KindSource  Kind = "source"
	KindContext Kind = "context"
)

// Parse tells the function an object of Source or Context belongs to and
// which kind it is; ok is false for any other key, which sless never
// wrote and must never delete.
func Parse(key string) (ns, fn string, kind Kind, ok bool) {
	parts := strings.Split(key, "/")
	if len(parts) != 4 || parts[0] == "" || parts[1] == "" {
		return "", "", "", false
	}
	var hexPart string
	switch Kind(parts[2]) {
	case KindSource:
		hexPart, ok = strings.CutSuffix(parts[3], ".zip")
	case KindContext:
		hexPart, ok = strings.CutSuffix(parts[3], ".tar.gz")
	}
	if !ok || !isSHA256Hex(hexPart) {
		return "", "", "", false
	}
	return parts[0], parts[1], Kind(parts[2]), true
}

func isSHA256Hex(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// servicesRoot holds the objects of SlessServices. A namespace name never
// starts with "_", so no function's prefix meets it, and its keys have a
// part more than Parse accepts: the sweep of function objects (pkg/sourcegc)
// never takes one for a function's.
const servicesRoot = "_services/"

// ServicePrefix is the folder of one SlessService's objects, ending in "/".
func ServicePrefix(ns, svc string) string { return servicesRoot + Prefix(ns, svc) }

// ServiceContext is a SlessService's build context whose digest is digest.
func ServiceContext(ns, svc, digest string) string {
	return ServicePrefix(ns, svc) + "context/" + strings.TrimPrefix(digest, "sha256:") + ".tar.gz"
}

// ServiceSource is a SlessService's uploaded zip whose SHA-256 is sha256hex.
func ServiceSource(ns, svc, sha256hex string) string {
	return ServicePrefix(ns, svc) + "source/" + sha256hex + ".zip"
}

// ParseService is Parse for a SlessService's objects.
func ParseService(key string) (ns, svc string, kind Kind, ok bool) {
	rest, found := strings.CutPrefix(key, servicesRoot)
	if !found {
		return "", "", "", false
	}
	return Parse(rest)
}
