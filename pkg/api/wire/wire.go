// Package wire is the REST API's JSON that is neither a CRD object nor an
// invocation record: what pkg/api writes and the Go client (pkg/client)
// reads, in a leaf package so the client does not link the server.
package wire

import "time"

// Revision is one entry of GET …/functions/{name}/revisions: a revision,
// what it runs and the share of the calls it takes now.
type Revision struct {
	Name         string    `json:"name"`
	Created      time.Time `json:"created,omitzero"`
	SourceDigest string    `json:"sourceDigest,omitempty"`
	Image        string    `json:"image,omitempty"`
	Ready        bool      `json:"ready"`
	Reason       string    `json:"reason,omitempty"`
	Message      string    `json:"message,omitempty"`
	// Percent is the share of the calls the revision takes, summed over the
	// traffic targets that resolve to it.
	Percent int64 `json:"percent"`
	// Latest marks the revision the latest-revision target follows.
	Latest bool `json:"latest,omitempty"`
	// Tags are the tagged targets that reach it, each with its URL.
	Tags []RevisionTag `json:"tags,omitempty"`
}

// RevisionTag is a tagged traffic target of a revision.
type RevisionTag struct {
	Tag string `json:"tag"`
	URL string `json:"url,omitempty"`
}
