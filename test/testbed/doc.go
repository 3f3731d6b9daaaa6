// Package testbed starts the real parts sless's tests run against: a
// kube-apiserver and etcd (controller-runtime's envtest) with sless's CRDs and
// Knative Serving's and Tekton's, whose defaulting and validation run as on a
// cluster, PostgreSQL, and an S3 server (versitygw). Each is started
// once per test package and hands every test a fresh namespace, database or
// bucket. A missing part fails the test with what to install; nothing is
// skipped silently.
package testbed
