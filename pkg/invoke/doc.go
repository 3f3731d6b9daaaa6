// Package invoke is the path every call of a function takes: the proxy that
// end users reach at /fn/{namespace}/{name}[/*path], its access policy, and
// the recorder that turns each call into a row of invocation history.
//
// The package talks to the rest of sless through small interfaces so that a
// Kubernetes cluster and local mode (`sless dev`) share one proxy:
//
//   - Resolver says where a function is served and whether anyone may call
//     it (package invoke/kube implements it over informer caches; local mode
//     over its process server).
//   - Authenticator tells who sent a request (pkg/auth's verifier).
//   - Sink stores batches of Records (pkg/adapter/postgres with COPY; local
//     mode over bbolt); History lists them back for the invocations API.
//
// PostgreSQL being slow or down must never reach a caller, so the proxy only
// hands a Record to the Recorder's bounded queue and moves on; the Recorder
// writes batches in the background and retries until the sink recovers.
package invoke
