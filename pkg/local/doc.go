// Package local is sless's back end for one machine without Kubernetes
// (`sless dev`): New(Options) and Dev.Run(ctx, listener) wire the parts
// below, the reconcilers and the front door (pkg/frontdoor) into one
// process. The parts implement the same interfaces the cluster adapters do:
//
//   - Blobs: s3.Store on a directory (source zips and build contexts).
//   - Store: the sless objects in a bbolt file, with the apiserver's
//     semantics for resourceVersion, generation, conflicts, finalizers and
//     deletion, behind controller-runtime's client.Client so the reconcilers
//     and the REST API run on it unchanged.
//   - Builder: adapter.Builder that unpacks a build context and runs the
//     runtime's dependency steps (runtimes.LocalSetup).
//   - Server: adapter.Server that runs each revision as a wrapper process on a
//     loopback port, stops it when idle (scale to zero) and starts it again
//     on the next request, holding that request until the process is healthy.
package local
