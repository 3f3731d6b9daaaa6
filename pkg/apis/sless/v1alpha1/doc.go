// Package v1alpha1 holds the sless.dev/v1alpha1 API: Function, Trigger and
// FunctionJob. The types carry their own CRD schema (kubebuilder markers and
// CEL rules), defaults and a Go validation that mirrors the schema, so that the
// REST API refuses exactly what `kubectl apply` refuses.
//
// +kubebuilder:object:generate=true
// +groupName=sless.dev
package v1alpha1
