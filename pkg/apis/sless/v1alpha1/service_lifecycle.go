package v1alpha1

// SlessServiceConditionSet is a SlessService's: the Function's, as the two
// share one status and one path source → build → serve (Workload). The
// verbs of function_lifecycle.go write it, reached through WorkloadStatus,
// and its Reasons are the Function's.
var SlessServiceConditionSet = FunctionConditionSet
