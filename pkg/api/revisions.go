package api

import (
	"net/http"
	"slices"
	"time"

	"github.com/gin-gonic/gin"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sless-dev/sless/pkg/adapter"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
)

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

// revisions serves GET …/functions/{name}/revisions and the services'
// route: the workload's revisions, newest first, with its status.traffic
// laid over them.
func (s *Server) revisions(kind newWorkload) gin.HandlerFunc {
	return func(c *gin.Context) {
		if s.opts.Revisions == nil {
			writeProblem(c, problem(http.StatusNotImplemented, "no-revisions", "No revisions", "this server lists no revisions"))
			return
		}
		w := kind()
		if err := s.objects.Get(c.Request.Context(), client.ObjectKey{Namespace: c.Param("ns"), Name: c.Param("name")}, w); err != nil {
			writeProblem(c, storeProblem(err))
			return
		}
		infos, err := s.opts.Revisions.ListRevisions(c.Request.Context(), w)
		if err != nil {
			s.log.Error("list revisions", "namespace", w.GetNamespace(), "kind", w.WorkloadKind(), "name", w.GetName(), "error", err)
			writeProblem(c, unavailable(5, "the revisions of %s %q cannot be read now: %v", w.WorkloadKind(), w.GetName(), err))
			return
		}
		c.JSON(http.StatusOK, gin.H{"items": RevisionsOf(infos, w.WorkloadStatus().Traffic)})
	}
}

// RevisionsOf lays traffic, a status.traffic, over infos (oldest first),
// newest first.
func RevisionsOf(infos []adapter.RevisionInfo, traffic []slessv1alpha1.TrafficTarget) []Revision {
	out := make([]Revision, 0, len(infos))
	for _, in := range slices.Backward(infos) {
		r := Revision{Name: in.Name, Created: in.Created, SourceDigest: in.SourceDigest, Image: in.Image,
			Ready: in.Ready, Reason: in.Reason, Message: in.Message}
		for _, t := range traffic {
			if t.RevisionName != in.Name {
				continue
			}
			r.Percent += t.PercentOf()
			r.Latest = r.Latest || t.IsLatest()
			if t.Tag != "" {
				r.Tags = append(r.Tags, RevisionTag{Tag: t.Tag, URL: t.URL})
			}
		}
		out = append(out, r)
	}
	return out
}
