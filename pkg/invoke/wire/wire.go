// Package wire is the invocations API's JSON: what the server writes
// (pkg/invoke) and the Go client reads (pkg/client), in a leaf package so
// the client does not link the proxy.
package wire

import "time"

// Invocation is one record of GET …/functions/{name}/invocations.
type Invocation struct {
	ID         string    `json:"id"`
	Namespace  string    `json:"namespace"`
	Function   string    `json:"function"`
	Revision   string    `json:"revision,omitempty"`
	Trigger    string    `json:"trigger"`
	RequestID  string    `json:"requestId"`
	StartedAt  time.Time `json:"startedAt"`
	DurationMs float64   `json:"durationMs"`
	Status     int       `json:"status"`
	BytesIn    int64     `json:"bytesIn"`
	BytesOut   int64     `json:"bytesOut"`
	ColdStart  bool      `json:"coldStart"`
	Error      string    `json:"error,omitempty"`
}
