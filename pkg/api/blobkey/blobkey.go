// Package blobkey names the objects sless keeps in blob storage, so the REST
// API that writes them and the reconciler and local builder that read them
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
