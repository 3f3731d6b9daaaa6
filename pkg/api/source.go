package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sless-dev/sless/pkg/adapter/s3"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/problems"
	"github.com/sless-dev/sless/pkg/source"
)

// UploadResult is the answer to PUT …/functions/{name}/source and
// …/services/{name}/source.
type UploadResult struct {
	// Archive is what spec.source.archive now says (or, for an object not
	// created yet, what to put there when creating it).
	Archive slessv1alpha1.ArchiveSource `json:"archive"`
	// BuildContext is the stored build context, when the object exists.
	BuildContext *StoredContext `json:"buildContext,omitempty"`
	// Changed is false when the object already had this archive: nothing
	// was written and no build starts.
	Changed bool `json:"changed"`
	// Function is the Function after an upload to one that exists.
	Function *slessv1alpha1.Function `json:"function,omitempty"`
	// Service is the SlessService after an upload to one that exists.
	Service *slessv1alpha1.SlessService `json:"service,omitempty"`
	// Message says what to do next when the upload deployed nothing: the
	// object does not exist yet.
	Message string `json:"message,omitempty"`
}

// uploaded is the answer of an upload to obj.
func uploaded(obj client.Object, r UploadResult) UploadResult {
	switch o := obj.(type) {
	case *slessv1alpha1.Function:
		r.Function = o
	case *slessv1alpha1.SlessService:
		r.Service = o
	}
	return r
}

// StoredContext locates a build context in blob storage.
type StoredContext struct {
	Key    string `json:"key"`
	Digest string `json:"digest"`
}

func (s *Server) maxArchive() int64 {
	if s.opts.Limits.MaxCompressed > 0 {
		return s.opts.Limits.MaxCompressed
	}
	return source.DefaultLimits.MaxCompressed
}

// putSource validates a zip, stores it and its build context, then points
// the Function or SlessService (k) at it; one handler serves both kinds. Storage comes first: if S3 cannot be reached the
// answer is 503 and the Function is unchanged. The same bytes again change
// nothing, so no build starts. For a Function that does not exist yet the
// zip is validated and stored, and the answer says which archive to name
// when creating it (how Terraform creates a Function from a zip).
//
// The query parameters runtime and entrypoint change those of the Function
// together with its code: new code often moves its handler, and neither
// order of two requests works, since the API checks each against the
// other's current value.
//
// At most MaxUploads run at once, since each holds its archive in memory; the
// slot is taken after the cheap checks of the request's headers and before
// the archive is read, and held until the answer, as the archive, its files
// and its build context stay in memory until then. An upload that finds no
// slot within UploadQueueWait is refused (503, Retry-After; 429 when its
// tenant holds its whole share) before its archive is read or anything is
// stored.
func (s *Server) putSource(k *kind) gin.HandlerFunc {
	return func(c *gin.Context) { s.upload(c, k) }
}

func (s *Server) upload(c *gin.Context, k *kind) {
	ctx := c.Request.Context()
	ns, name := c.Param("ns"), c.Param("name")
	target, p := uploadTarget(c)
	if p != nil {
		s.metrics.uploads.WithLabelValues("refused").Inc()
		writeProblem(c, p)
		return
	}
	// A client that stops sending is cut off after BodyIdleTimeout, and
	// one holding a slot that sends below UploadMinRate once a window has
	// passed, so neither can keep an upload slot from others.
	watch := s.watch(c)
	body, p := s.openArchive(c)
	if p != nil {
		watch.stop()
		s.refuseUpload(c, p)
		return
	}
	release, p := s.takeUploadSlot(ctx, ns)
	if p != nil {
		watch.stop()
		s.refuseUpload(c, p)
		return
	}
	defer release()
	watch.holdToRate(s.opts.UploadMinRate, s.opts.UploadRateWindow)
	zipBytes, p := s.readArchive(c, body)
	watch.stop()
	if p != nil {
		s.refuseUpload(c, p)
		return
	}
	sum := sha256.Sum256(zipBytes)
	archive := slessv1alpha1.ArchiveSource{Bucket: s.opts.Bucket, Key: k.built.sourceKey(ns, name, hex.EncodeToString(sum[:])), SHA256: hex.EncodeToString(sum[:])}
	files, modes, err := source.ReadZipModes(bytes.NewReader(zipBytes), int64(len(zipBytes)), s.opts.Limits)
	if err != nil {
		s.metrics.uploads.WithLabelValues("refused").Inc()
		writeProblem(c, archiveProblem(err))
		return
	}

	// Preconditions and deletion are decided before anything is stored: an
	// upload refused after storing would leave its blobs behind, and for a
	// Function being deleted after the finalizer has emptied its prefix,
	// for good.
	ifMatch, hasIfMatch := c.Request.Header["If-Match"]
	fn := k.newObj().(slessv1alpha1.Workload)
	err = s.live.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, fn)
	if apierrors.IsNotFound(err) && hasIfMatch {
		// If-Match holds only for a current version (RFC 9110 13.1.1).
		writeProblem(c, preconditionFailed("If-Match %s names a version of %s %q, which does not exist", strings.Join(ifMatch, ", "), k.kind, name))
		return
	}
	if apierrors.IsNotFound(err) {
		if p := s.storeArchive(ctx, nil, archive, zipBytes); p != nil {
			writeProblem(c, p)
			return
		}
		// Stored, but no Function changed and no build starts: a newcomer
		// who uploads first must not read this as deployed.
		s.metrics.uploads.WithLabelValues("unchanged").Inc()
		s.metrics.upBytes.Add(float64(len(zipBytes)))
		c.JSON(http.StatusOK, UploadResult{Archive: archive, Changed: false, Message: fmt.Sprintf(
			"the archive is stored, but no %s %q exists in namespace %s, so nothing was deployed: "+
				"create it (POST /v1/namespaces/%s/%s) with spec.source.archive set to this archive", k.kind, name, ns, ns, k.plural)})
		return
	}
	if err != nil {
		writeProblem(c, storeProblem(err))
		return
	}
	if hasIfMatch && !etagMatches(ifMatch, fn.GetResourceVersion()) {
		writeProblem(c, preconditionFailed("If-Match %s does not match the %s's current version %s", strings.Join(ifMatch, ", "), k.kind, etag(fn)))
		return
	}
	// If-None-Match: * uploads only for an object not created yet.
	if p := checkIfNoneMatch(c, fn.GetResourceVersion()); p != nil {
		writeProblem(c, p)
		return
	}
	if fn.GetDeletionTimestamp() != nil {
		writeProblem(c, conflict("%s %q is being deleted", k.kind, name).withRetry(retryAfterDeleting))
		return
	}

	// The build context depends on the files, the runtime and the
	// entrypoint; it is made again only if a concurrent writer changed the
	// latter two between our reads.
	var stored *StoredContext
	var builtFor [2]string
	storeContext := func(fn slessv1alpha1.Workload) *Problem {
		bs := fn.BuildSpec()
		if stored != nil && builtFor == [2]string{bs.Runtime, bs.Entrypoint} {
			return nil
		}
		bc, p := buildContext(k, fn, files, modes)
		if p != nil {
			return p
		}
		key := k.built.contextKey(ns, name, bc.Digest)
		if p := s.putOnce(ctx, key, bc.TarGz, "application/gzip"); p != nil {
			return p
		}
		stored = &StoredContext{Key: key, Digest: bc.Digest}
		builtFor = [2]string{bs.Runtime, bs.Entrypoint}
		return nil
	}
	if p := storeContext(target.apply(k, fn)); p != nil {
		s.metrics.uploads.WithLabelValues("refused").Inc()
		writeProblem(c, p)
		return
	}
	if p := s.storeArchive(ctx, fn.BuildSpec(), archive, zipBytes); p != nil {
		writeProblem(c, p)
		return
	}
	if p := s.ensureTenant(c); p != nil {
		writeProblem(c, p)
		return
	}

	// Point the object at the archive, re-reading on a lost race: two
	// uploads at once each store their own bytes, and the object ends up
	// naming exactly one of them. With If-Match the race is lost for good:
	// the version the client named is no longer current.
	retry := newRaceRetry()
	for {
		if fn.GetDeletionTimestamp() != nil {
			writeProblem(c, conflict("%s %q is being deleted", k.kind, name).withRetry(retryAfterDeleting))
			return
		}
		if p := checkIfNoneMatch(c, fn.GetResourceVersion()); p != nil {
			writeProblem(c, p)
			return
		}
		if a := fn.BuildSpec().Source.Archive; a != nil && equality.Semantic.DeepEqual(*a, archive) && !target.changes(fn) {
			s.metrics.uploads.WithLabelValues("unchanged").Inc()
			c.Header("ETag", etag(fn))
			c.JSON(http.StatusOK, uploaded(s.shown(k, fn), UploadResult{Archive: archive, BuildContext: stored, Changed: false}))
			return
		}
		// Runtime or entrypoint may have changed since the context was made.
		if p := storeContext(target.apply(k, fn)); p != nil {
			writeProblem(c, p)
			return
		}
		next := target.apply(k, fn)
		bs := next.BuildSpec()
		k.built.setBuild(next, bs.Runtime, bs.Entrypoint, slessv1alpha1.FunctionSource{Archive: archive.DeepCopy()})
		if errs := k.validate(next); len(errs) > 0 {
			writeProblem(c, invalid(k.kind, errs))
			return
		}
		err := s.objects.Update(ctx, next)
		if err == nil {
			s.metrics.uploads.WithLabelValues("changed").Inc()
			s.metrics.upBytes.Add(float64(len(zipBytes)))
			c.Header("ETag", etag(next))
			c.JSON(http.StatusOK, uploaded(s.shown(k, next), UploadResult{Archive: archive, BuildContext: stored, Changed: true}))
			return
		}
		if apierrors.IsConflict(err) && hasIfMatch {
			writeProblem(c, preconditionFailed("%s %q changed after If-Match was checked", k.kind, name))
			return
		}
		if !apierrors.IsConflict(err) || !retry.again(ctx) {
			writeProblem(c, lostRace(err))
			return
		}
		fn = k.newObj().(slessv1alpha1.Workload)
		if err := s.live.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, fn); err != nil {
			writeProblem(c, storeProblem(err))
			return
		}
	}
}

// buildTarget is the runtime and entrypoint an upload asks for; empty
// fields keep the object's own.
type buildTarget struct{ runtime, entrypoint string }

func uploadTarget(c *gin.Context) (buildTarget, *Problem) {
	var t buildTarget
	var errs []FieldError
	if v, ok := c.GetQuery("runtime"); ok {
		_, known := slessv1alpha1.CanonicalRuntime(v)
		if !known {
			errs = append(errs, FieldError{Field: "runtime", Type: "FieldValueNotSupported",
				Detail: fmt.Sprintf("unknown runtime %q", v)})
		}
		// Stored as given: an alias is a valid spec.runtime, and the
		// client's own copy of the spec must not see it change.
		t.runtime = v
	}
	if v, ok := c.GetQuery("entrypoint"); ok {
		if v == "" {
			errs = append(errs, FieldError{Field: "entrypoint", Type: "FieldValueRequired", Detail: "must not be empty when given"})
		}
		t.entrypoint = v
	}
	if len(errs) > 0 {
		p := badRequest("the upload's query parameters are invalid")
		p.Errors = errs
		return t, p
	}
	return t, nil
}

// changes tells whether applying t would change fn.
func (t buildTarget) changes(fn slessv1alpha1.Workload) bool {
	bs := fn.BuildSpec()
	return (t.runtime != "" && t.runtime != bs.Runtime) || (t.entrypoint != "" && t.entrypoint != bs.Entrypoint)
}

// apply returns a copy of fn (of kind k) with t's runtime and entrypoint.
func (t buildTarget) apply(k *kind, fn slessv1alpha1.Workload) slessv1alpha1.Workload {
	out := fn.DeepCopyObject().(slessv1alpha1.Workload)
	bs := out.BuildSpec()
	rt, ep := bs.Runtime, bs.Entrypoint
	if t.runtime != "" {
		rt = t.runtime
	}
	if t.entrypoint != "" {
		ep = t.entrypoint
	}
	k.built.setBuild(out, rt, ep, bs.Source)
	return out
}

// shown is an object of kind k as the API renders it.
func (s *Server) shown(k *kind, obj client.Object) client.Object {
	out := obj.DeepCopyObject().(client.Object)
	out.GetObjectKind().SetGroupVersionKind(slessv1alpha1.SchemeGroupVersion.WithKind(k.kind))
	out.SetManagedFields(nil)
	return out
}

// getSource returns the uploaded zip of a Function or SlessService (k).
func (s *Server) getSource(k *kind) gin.HandlerFunc {
	return func(c *gin.Context) { s.download(c, k) }
}

func (s *Server) download(c *gin.Context, k *kind) {
	ctx := c.Request.Context()
	fn := k.newObj().(slessv1alpha1.Workload)
	if err := s.objects.Get(ctx, client.ObjectKey{Namespace: c.Param("ns"), Name: c.Param("name")}, fn); err != nil {
		writeProblem(c, storeProblem(err))
		return
	}
	a := fn.BuildSpec().Source.Archive
	if a == nil {
		writeProblem(c, notFound("%s %q has no uploaded archive", k.kind, fn.GetName()))
		return
	}
	if notModified(c, `"`+a.SHA256+`"`) {
		return // the client has these bytes: storage is not read
	}
	rc, size, err := s.opts.Blobs.Get(ctx, a.Key)
	if errors.Is(err, s3.ErrNotFound) {
		writeProblem(c, notFound("the archive %s of %s %q is missing from storage", a.SHA256, k.kind, fn.GetName()))
		return
	}
	if err != nil {
		writeProblem(c, blobProblem(err))
		return
	}
	defer rc.Close()
	headers := map[string]string{
		"ETag":                `"` + a.SHA256 + `"`,
		"Content-Disposition": fmt.Sprintf(`attachment; filename="%s.zip"`, fn.GetName()),
	}
	if c.Request.Method == http.MethodHead {
		// The zip would be read from storage only to be thrown away.
		for k, v := range headers {
			c.Header(k, v)
		}
		c.Header("Content-Type", "application/zip")
		c.Header("Content-Length", strconv.FormatInt(size, 10))
		c.Status(http.StatusOK)
		return
	}
	c.DataFromReader(http.StatusOK, size, "application/zip", rc, headers)
}

// refuseUpload answers an upload refused before it was read through,
// counted by why: busy (no slot), tenant-busy (the tenant's share is held),
// too-slow (below UploadMinRate), stalled (BodyIdleTimeout) or refused (a
// bad request). All but the last are logged, since they say the server or a
// tenant is short of slots rather than that a client erred. Those close the
// connection: net/http would otherwise read the rest of the body first, for
// as long as a trickling client takes to send it. A bad request keeps
// net/http's way, which reads a short rest so that closing does not reset
// the connection under the answer (a body just over the cap).
func (s *Server) refuseUpload(c *gin.Context, p *Problem) {
	result := "refused"
	switch p.Type {
	case problems.TypeBase + "busy":
		result = "busy"
	case problems.TypeBase + "tenant-busy":
		result = "tenant-busy"
	case problems.TypeBase + "body-too-slow":
		result = "too-slow"
	case problems.TypeBase + "body-timeout":
		result = "stalled"
	}
	s.metrics.uploads.WithLabelValues(result).Inc()
	if result != "refused" {
		c.Header("Connection", "close")
		s.log.Info("source upload refused", "namespace", c.Param("ns"), "function", c.Param("name"),
			"result", result, "status", p.Status, "detail", p.Detail)
	}
	writeProblem(c, p)
}

// takeUploadSlot waits up to UploadQueueWait, or until the request ends, for
// one of tenant's MaxUploadsPerTenant slots and then one of the MaxUploads;
// release gives both back. The tenant's share is taken first, so an upload
// over it never stands in the server's queue ahead of other tenants'.
func (s *Server) takeUploadSlot(ctx context.Context, tenant string) (release func(), p *Problem) {
	releaseShare, shareTaken := s.tenantUploads.tryAcquire(tenant)
	if !shareTaken || !s.uploads.TryAcquire(1) {
		s.metrics.upWaiting.Inc()
		defer s.metrics.upWaiting.Dec()
		wctx, cancel := context.WithTimeout(ctx, s.opts.UploadQueueWait)
		defer cancel()
		if !shareTaken {
			var err error
			if releaseShare, err = s.tenantUploads.acquire(wctx, tenant); err != nil {
				return nil, problem(http.StatusTooManyRequests, "tenant-busy", "Too many uploads of this tenant in progress",
					"namespace %s has %d source archives being uploaded or checked, the most one tenant may hold at once (of %d on this server); nothing was changed, try again",
					tenant, s.opts.MaxUploadsPerTenant, s.opts.MaxUploads).
					withRetry(retryAfterBusy)
			}
		}
		if err := s.uploads.Acquire(wctx, 1); err != nil {
			releaseShare()
			return nil, problem(http.StatusServiceUnavailable, "busy", "Too many uploads in progress",
				"%d source archives are being uploaded or checked, the most this server holds at once; nothing was changed, try again", s.opts.MaxUploads).
				withRetry(retryAfterBusy)
		}
	}
	s.metrics.upActive.Inc()
	return func() {
		s.metrics.upActive.Dec()
		s.uploads.Release(1)
		releaseShare()
	}, nil
}

// openArchive finds the zip of an upload without reading it: the raw body
// (application/zip or application/octet-stream) or the first file of a
// multipart/form-data body. A raw body that says it is too large is refused
// here, before it takes an upload slot.
func (s *Server) openArchive(c *gin.Context) (io.Reader, *Problem) {
	limit := s.maxArchive()
	switch mt := mediaType(c.GetHeader("Content-Type")); mt {
	case "", "application/zip", "application/octet-stream", "application/x-zip-compressed":
		if c.Request.ContentLength > limit {
			return nil, tooLarge("the archive is %d bytes, the limit is %d", c.Request.ContentLength, limit).naming("body", field.ErrorTypeTooLong, fmt.Sprintf("at most %d bytes", limit))
		}
		return c.Request.Body, nil
	case "multipart/form-data":
		mr, err := c.Request.MultipartReader()
		if err != nil {
			return nil, badRequest("malformed multipart body: %v", err).naming("body", field.ErrorTypeInvalid, err.Error())
		}
		for {
			part, err := mr.NextPart()
			if err == io.EOF {
				return nil, badRequest("the multipart body has no file part").naming("file", field.ErrorTypeRequired, "a part named file, or one with a file name, holding the zip")
			}
			if errors.Is(err, errBodyStalled) {
				return nil, s.bodyReadProblem(c, "multipart body", err)
			}
			if err != nil {
				return nil, badRequest("malformed multipart body: %v", err).naming("body", field.ErrorTypeInvalid, err.Error())
			}
			if part.FileName() != "" || part.FormName() == "file" {
				return part, nil
			}
		}
	default:
		return nil, unsupportedMediaType("upload a zip as application/zip or as a file in multipart/form-data, not %q", mt)
	}
}

// readArchive reads the zip from r, at most the archive limit.
func (s *Server) readArchive(c *gin.Context, r io.Reader) ([]byte, *Problem) {
	limit := s.maxArchive()
	var buf bytes.Buffer
	if n := c.Request.ContentLength; n > 0 && n <= limit {
		buf.Grow(int(n))
	}
	n, err := io.Copy(&buf, io.LimitReader(r, limit+1))
	if err != nil {
		return nil, s.bodyReadProblem(c, "archive", err)
	}
	if n > limit {
		return nil, tooLarge("the archive is larger than the limit of %d bytes", limit).naming("body", field.ErrorTypeTooLong, fmt.Sprintf("at most %d bytes", limit))
	}
	if n == 0 {
		return nil, badRequest("the archive is empty").naming("body", field.ErrorTypeRequired, "a zip archive is required")
	}
	return buf.Bytes(), nil
}

func archiveProblem(err error) *Problem {
	var se *source.Error
	if errors.As(err, &se) {
		return sourceProblem("body", se)
	}
	return internal(err)
}

// buildContext makes the build context of fn (of kind k) from files and
// their modes, answering a missing or malformed entrypoint as a fault of
// spec.entrypoint. It is the context the controller builds from the same
// archive (pkg/reconciler/function), so the digest reported is the one the
// object's status will show.
func buildContext(k *kind, fn slessv1alpha1.Workload, files source.Files, modes source.Modes) (*source.Context, *Problem) {
	bs := fn.BuildSpec()
	if bs.Entrypoint == "" {
		p := badRequest("%s %q has no spec.entrypoint; set one before uploading source", k.kind, fn.GetName())
		p.Errors = []FieldError{{Field: "spec.entrypoint", Detail: "required to build from source", Type: "FieldValueRequired"}}
		return nil, p
	}
	bc, err := source.BuildContext(source.Input{Runtime: bs.Runtime, Entrypoint: bs.Entrypoint, Mode: fn.Mode(), Files: files, Modes: modes})
	if err != nil {
		var se *source.Error
		if !errors.As(err, &se) {
			return nil, internal(err)
		}
		f := "body"
		switch se.Reason {
		case source.ReasonEntrypointMissing, source.ReasonBadEntrypoint:
			f = "spec.entrypoint"
		case source.ReasonUnknownRuntime:
			f = "spec.runtime"
		}
		return nil, sourceProblem(f, se)
	}
	return bc, nil
}

// storeArchive stores an upload's zip. One stored before is written again
// unless spec (nil: not created yet) names it already: the write makes it
// young, so the sweep for objects no Function needs (pkg/sourcegc) leaves
// it to the create or update about to name it, however old it was.
func (s *Server) storeArchive(ctx context.Context, spec *slessv1alpha1.FunctionSpec, a slessv1alpha1.ArchiveSource, data []byte) *Problem {
	if spec != nil && spec.Source.Archive != nil && *spec.Source.Archive == a {
		return s.putOnce(ctx, a.Key, data, "application/zip")
	}
	if err := s.opts.Blobs.Put(ctx, a.Key, bytes.NewReader(data), int64(len(data)), "application/zip"); err != nil {
		return blobProblem(err)
	}
	return nil
}

// putOnce stores data under a content-addressed key unless it is there.
func (s *Server) putOnce(ctx context.Context, key string, data []byte, contentType string) *Problem {
	ok, err := s.opts.Blobs.Exists(ctx, key)
	if err != nil {
		return blobProblem(err)
	}
	if ok {
		return nil
	}
	if err := s.opts.Blobs.Put(ctx, key, bytes.NewReader(data), int64(len(data)), contentType); err != nil {
		return blobProblem(err)
	}
	return nil
}

// checkSource checks what the shared validation cannot of a Function or
// SlessService (k): that an inline source holds its entrypoint, and that an
// archive named in the spec is one uploaded for this object, whose
// entrypoint is there, with its build context stored. Unchanged sources are
// not fetched again. old is nil on create.
func (s *Server) checkSource(ctx context.Context, k *kind, ns string, old, fn slessv1alpha1.Workload) *Problem {
	spec := fn.BuildSpec()
	src := &spec.Source
	switch {
	case src.Inline != nil:
		if err := source.CheckEntrypoint(spec.Runtime, spec.Entrypoint, source.Inline(src.Inline.Files)); err != nil {
			var se *source.Error
			if errors.As(err, &se) {
				return sourceProblem("spec.entrypoint", se)
			}
			return internal(err)
		}
	case src.Archive != nil:
		a := src.Archive
		if old != nil {
			was := old.BuildSpec()
			if was.Source.Archive != nil && *was.Source.Archive == *a && was.Runtime == spec.Runtime && was.Entrypoint == spec.Entrypoint {
				return nil
			}
		}
		want := k.built.sourceKey(ns, fn.GetName(), a.SHA256)
		if a.Bucket != s.opts.Bucket || a.Key != want {
			p := badRequest("spec.source.archive is set by uploading a zip to .../%s/%s/source", k.plural, fn.GetName())
			p.Errors = []FieldError{{Field: "spec.source.archive", Type: "FieldValueInvalid",
				Detail: fmt.Sprintf("must name an archive uploaded for this %s: bucket %q, key %q", k.kind, s.opts.Bucket, want)}}
			return p
		}
		// Checking the archive holds it and its files in memory, as an
		// upload does, so it takes one of the same slots.
		release, p := s.takeUploadSlot(ctx, ns)
		if p != nil {
			return p
		}
		defer release()
		rc, _, err := s.opts.Blobs.Get(ctx, a.Key)
		if errors.Is(err, s3.ErrNotFound) {
			p := badRequest("no archive with sha256 %s was uploaded for %s %q", a.SHA256, k.kind, fn.GetName())
			p.Errors = []FieldError{{Field: "spec.source.archive.sha256", Type: "FieldValueNotFound", Detail: "upload the zip to .../source first"}}
			return p
		}
		if err != nil {
			return blobProblem(err)
		}
		defer rc.Close()
		data, err := io.ReadAll(io.LimitReader(rc, s.maxArchive()+1))
		if err != nil {
			return blobProblem(fmt.Errorf("read %s: %w: %w", a.Key, s3.ErrUnavailable, err))
		}
		if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != a.SHA256 {
			return internal(fmt.Errorf("stored archive %s does not have its sha256", a.Key))
		}
		files, modes, err := source.ReadZipModes(bytes.NewReader(data), int64(len(data)), s.opts.Limits)
		if err != nil {
			return archiveProblem(err)
		}
		bc, p := buildContext(k, fn, files, modes)
		if p != nil {
			return p
		}
		return s.putOnce(ctx, k.built.contextKey(ns, fn.GetName(), bc.Digest), bc.TarGz, "application/gzip")
	}
	return nil
}
