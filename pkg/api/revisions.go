package api

import (
	"net/http"
	"slices"

	"github.com/gin-gonic/gin"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sless-dev/sless/pkg/adapter"
	"github.com/sless-dev/sless/pkg/api/wire"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
)

// Revision and RevisionTag are the JSON of …/revisions.
type (
	Revision    = wire.Revision
	RevisionTag = wire.RevisionTag
)

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
