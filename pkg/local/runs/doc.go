// Package runs is what local mode has in place of a cluster's Jobs, CronJobs
// and consumer Deployments: FunctionJob runs as processes in the runtime's
// job mode (the FunctionJob reconciler's adapter.JobRunner), cron triggers'
// schedules and queue triggers' consumers in process (the Trigger
// reconciler's Carrier), each call recorded like an invoke.
package runs
