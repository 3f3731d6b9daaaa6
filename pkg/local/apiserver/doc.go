// Package apiserver is what local mode has in place of a kube-apiserver, its
// etcd and controller-runtime's informers: sless's objects in a bbolt file
// behind client.Client, with the apiserver's semantics for resourceVersion,
// generation, conflicts, finalizers, deletion and CRD defaults (Store);
// watch events (Subscribe) and reconcile loops on them (Loop); and, in the
// same file, the invocation records a cluster keeps in PostgreSQL (Records).
package apiserver
