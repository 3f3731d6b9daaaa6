// Package local is sless's back end for one machine without Kubernetes
// (`sless dev`): New(Options) and Dev.Run(ctx, listener) wire the parts
// below, the reconcilers and the front door (pkg/frontdoor) into one
// process. The parts implement the same interfaces the cluster adapters do:
//
//   - blobs.Store (pkg/local/blobs, in place of S3): s3.Store on a
//     directory (source zips and build contexts).
//   - apiserver.Store (pkg/local/apiserver, in place of a kube-apiserver):
//     the sless objects in a bbolt file, with the apiserver's semantics for
//     resourceVersion, generation, conflicts, finalizers and deletion,
//     behind controller-runtime's client.Client so the reconcilers and the
//     REST API run on it unchanged; the reconcile loops; the records.
//   - build.Builder (pkg/local/build, in place of Tekton's builds):
//     adapter.Builder that unpacks a build context and runs the runtime's
//     dependency steps (runtimes.LocalSetup).
//   - serving.Server (pkg/local/serving, in place of Knative Serving):
//     adapter.Server that runs each revision as a wrapper process on a
//     loopback port, stops it when idle (scale to zero) and starts it again
//     on the next request, holding that request until the process is healthy.
//   - runs.Runs (pkg/local/runs, in place of Jobs, CronJobs and consumer
//     Deployments): the JobRunner and trigger Carrier of local mode, which run
//     FunctionJobs and cron and queue Triggers in process through the same
//     reconcilers a cluster runs.
package local
