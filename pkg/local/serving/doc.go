// Package serving is what local mode has in place of Knative Serving: each
// revision of a Function or SlessService a wrapper process on a loopback
// port, stopped when idle and started again by the next call (Server); the
// invoke proxy's view of what serves (Resolver); and the log files the
// processes write (Logs).
package serving
