package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/gin-gonic/gin"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	sigsjson "sigs.k8s.io/json"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/limits"
)

// MergePatchContentType is the only PATCH body the API takes (RFC 7396).
const MergePatchContentType = "application/merge-patch+json"

// List is the body of a list answer: the objects and, when more remain, the
// cursor that continues the list.
type List struct {
	Items []json.RawMessage `json:"items"`
	Next  string            `json:"next,omitempty"`
}

func (s *Server) list(k *kind) gin.HandlerFunc {
	return func(c *gin.Context) {
		ns := c.Param("ns")
		limit, p := listLimit(c)
		if p != nil {
			writeProblem(c, p)
			return
		}
		opts := []client.ListOption{client.InNamespace(ns), client.Limit(limit)}
		of := listCursor{Kind: k.kind, Namespace: ns}
		// The selector is parsed here rather than passed through raw so a
		// malformed one is a 400 naming the parameter whichever store is
		// behind the API, and the store gets a validated selector.
		if v := c.Query("labelSelector"); v != "" {
			sel, err := labels.Parse(v)
			if err != nil {
				writeProblem(c, badRequestField("labelSelector", v, err.Error()))
				return
			}
			opts = append(opts, client.MatchingLabelsSelector{Selector: sel})
			of.Selector = sel.String()
		}
		cur := c.Query("cursor")
		if cur != "" {
			token, ok := continueOf(cur, of)
			if !ok {
				writeProblem(c, badRequestField("cursor", cur, "not a cursor of this list: pass the next of the previous page, with the same labelSelector"))
				return
			}
			opts = append(opts, client.Continue(token))
		}
		l := k.newList()
		if err := s.objects.List(c.Request.Context(), l, opts...); err != nil {
			p := storeProblem(err)
			if p.Status == http.StatusBadRequest && cur != "" {
				p = badRequestField("cursor", cur, "not a cursor this API returned")
			}
			writeProblem(c, p)
			return
		}
		out := List{Items: []json.RawMessage{}}
		if token := l.GetContinue(); token != "" {
			of.Continue = token
			out.Next = of.encode()
		}
		for _, o := range k.items(l) {
			b, err := s.render(k, o)
			if err != nil {
				writeProblem(c, internal(err))
				return
			}
			out.Items = append(out.Items, b)
		}
		c.JSON(http.StatusOK, out)
	}
}

func (s *Server) get(k *kind) gin.HandlerFunc {
	return func(c *gin.Context) {
		obj := k.newObj()
		if err := s.objects.Get(c.Request.Context(), client.ObjectKey{Namespace: c.Param("ns"), Name: c.Param("name")}, obj); err != nil {
			writeProblem(c, storeProblem(err))
			return
		}
		if notModified(c, etag(obj)) {
			return
		}
		s.respond(c, k, http.StatusOK, obj)
	}
}

func (s *Server) create(k *kind) gin.HandlerFunc {
	return func(c *gin.Context) {
		ns := c.Param("ns")
		in, p := s.readObject(c, k)
		if p != nil {
			writeProblem(c, p)
			return
		}
		if in.GetName() == "" {
			writeProblem(c, invalid(k.kind, field.ErrorList{field.Required(field.NewPath("metadata", "name"), "")}))
			return
		}
		obj := s.fresh(k, ns, in)
		if p := s.admit(c.Request.Context(), k, ns, nil, obj); p != nil {
			writeProblem(c, p)
			return
		}
		if p := s.ensureTenant(c); p != nil {
			writeProblem(c, p)
			return
		}
		p = s.createWaitingForDeletion(c.Request.Context(), k, obj)
		// A create is a 404 only for want of its namespace: the tenant's,
		// remembered as made, may have been deleted since.
		if p != nil && p.Status == http.StatusNotFound && ns == IdentityOf(c).Namespace && s.forgetTenant(c) {
			if p = s.ensureTenant(c); p == nil {
				p = s.createWaitingForDeletion(c.Request.Context(), k, obj)
			}
		}
		if p != nil {
			writeProblem(c, p)
			return
		}
		c.Header("Location", c.Request.URL.Path+"/"+obj.GetName())
		s.respond(c, k, http.StatusCreated, obj)
	}
}

// createWaitingForDeletion creates obj. When an object of that name is still
// being deleted (a finalizer holds it), it waits up to DeleteWait for it to
// go, reading uncached, then answers 409 with Retry-After: the predecessor
// returned 409 at once, and a stale cache claimed the name still existed.
func (s *Server) createWaitingForDeletion(ctx context.Context, k *kind, obj client.Object) *Problem {
	deadline := time.Now().Add(s.opts.DeleteWait)
	for {
		attempt := obj.DeepCopyObject().(client.Object)
		err := s.objects.Create(ctx, attempt)
		if err == nil {
			// Copy back what the store set (uid, resourceVersion, ...).
			reflectInto(obj, attempt)
			return nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return storeProblem(err)
		}
		existing := k.newObj()
		gerr := s.live.Get(ctx, client.ObjectKeyFromObject(obj), existing)
		switch {
		case apierrors.IsNotFound(gerr):
			continue // deleted between the two calls: try again at once
		case gerr != nil:
			return storeProblem(gerr)
		case existing.GetDeletionTimestamp() == nil:
			return conflict("%s %q already exists", k.kind, obj.GetName())
		}
		if time.Now().After(deadline) {
			return conflict("%s %q is still being deleted; try again shortly", k.kind, obj.GetName()).withRetry(retryAfterDeleting)
		}
		select {
		case <-ctx.Done():
			return unavailable(retryAfterDeleting, "gave up waiting for %s %q to be deleted", k.kind, obj.GetName())
		case <-time.After(deletePoll):
		}
	}
}

func (s *Server) replace(k *kind) gin.HandlerFunc {
	return func(c *gin.Context) {
		name := c.Param("name")
		in, p := s.readObject(c, k)
		if p != nil {
			writeProblem(c, p)
			return
		}
		if in.GetName() != "" && in.GetName() != name {
			writeProblem(c, badRequestField("metadata.name", in.GetName(), "must match the name in the path, "+name))
			return
		}
		in.SetName(name)
		bodyRV := in.GetResourceVersion()
		s.readModifyWrite(c, k, bodyRV, func(cur client.Object) (client.Object, *Problem) {
			next := cur.DeepCopyObject().(client.Object)
			next.SetLabels(in.GetLabels())
			next.SetAnnotations(in.GetAnnotations())
			k.copyUser(next, in)
			return next, nil
		})
	}
}

func (s *Server) patch(k *kind) gin.HandlerFunc {
	return func(c *gin.Context) {
		if mt := mediaType(c.GetHeader("Content-Type")); mt != MergePatchContentType {
			writeProblem(c, unsupportedMediaType("PATCH takes a JSON merge patch (Content-Type: %s), not %q", MergePatchContentType, mt))
			return
		}
		body, p := s.readJSON(c)
		if p != nil {
			writeProblem(c, p)
			return
		}
		var shape any
		if err := json.Unmarshal(body, &shape); err != nil {
			writeProblem(c, malformed(body, err, nil))
			return
		}
		if _, ok := shape.(map[string]any); !ok {
			writeProblem(c, badRequest("a merge patch must be a JSON object").naming("body", field.ErrorTypeTypeInvalid, "must be a JSON object"))
			return
		}
		var bodyRV string
		if md, ok := shape.(map[string]any)["metadata"].(map[string]any); ok {
			bodyRV, _ = md["resourceVersion"].(string)
		}
		s.readModifyWrite(c, k, bodyRV, func(cur client.Object) (client.Object, *Problem) {
			doc, err := json.Marshal(cur)
			if err != nil {
				return nil, internal(err)
			}
			merged, err := jsonpatch.MergePatch(doc, body)
			if err != nil {
				return nil, badRequest("the merge patch cannot be applied: %v", err)
			}
			in := k.newObj()
			if p := decodeStrict(merged, in); p != nil {
				return nil, p
			}
			if p := checkTypeMeta(k, in); p != nil {
				return nil, p
			}
			if in.GetName() != cur.GetName() {
				return nil, badRequestField("metadata.name", in.GetName(), "cannot be changed")
			}
			if in.GetNamespace() != cur.GetNamespace() {
				return nil, badRequestField("metadata.namespace", in.GetNamespace(), "cannot be changed")
			}
			next := cur.DeepCopyObject().(client.Object)
			next.SetLabels(in.GetLabels())
			next.SetAnnotations(in.GetAnnotations())
			k.copyUser(next, in)
			return next, nil
		})
	}
}

// readModifyWrite is the body of PUT and PATCH: read the object uncached,
// check the client's precondition, build the new object with mutate,
// validate, and update with the read resourceVersion. If-Match that does not
// match is a 412; a resourceVersion in the body that does not match is a 409
// (the apiserver's semantics). Without either, a lost race is retried on a
// fresh read, because the request means "make it so" rather than "change
// this version".
func (s *Server) readModifyWrite(c *gin.Context, k *kind, bodyRV string, mutate func(cur client.Object) (client.Object, *Problem)) {
	ctx := c.Request.Context()
	ns, name := c.Param("ns"), c.Param("name")
	_, hasIfMatch := c.Request.Header["If-Match"]
	retry := newRaceRetry()
	for {
		cur := k.newObj()
		if err := s.live.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cur); err != nil {
			writeProblem(c, storeProblem(err))
			return
		}
		if p := checkWrite(c, cur, bodyRV, k.kind, "object"); p != nil {
			writeProblem(c, p)
			return
		}
		next, p := mutate(cur)
		if p != nil {
			writeProblem(c, p)
			return
		}
		if p := s.admit(ctx, k, ns, cur, next); p != nil {
			writeProblem(c, p)
			return
		}
		if p := s.ensureTenant(c); p != nil {
			writeProblem(c, p)
			return
		}
		err := s.objects.Update(ctx, next)
		if err == nil {
			s.respond(c, k, http.StatusOK, next)
			return
		}
		if apierrors.IsConflict(err) {
			if p := staleWrite(hasIfMatch, bodyRV, "object"); p != nil {
				writeProblem(c, p)
				return
			}
			if retry.again(ctx) {
				continue
			}
		}
		writeProblem(c, lostRace(err))
		return
	}
}

func (s *Server) remove(k *kind) gin.HandlerFunc {
	return func(c *gin.Context) {
		ctx := c.Request.Context()
		key := client.ObjectKey{Namespace: c.Param("ns"), Name: c.Param("name")}
		_, hasIfMatch := c.Request.Header["If-Match"]
		retry := newRaceRetry()
		for {
			cur := k.newObj()
			if err := s.live.Get(ctx, key, cur); err != nil {
				writeProblem(c, storeProblem(err))
				return
			}
			if p := checkPreconditions(c, cur); p != nil {
				writeProblem(c, p)
				return
			}
			uid := cur.GetUID()
			err := s.objects.Delete(ctx, cur, deletePreconditions(cur, hasIfMatch))
			if apierrors.IsConflict(err) && !hasIfMatch && retry.again(ctx) {
				continue // recreated under the same name meanwhile: look again
			}
			if apierrors.IsConflict(err) && hasIfMatch {
				writeProblem(c, staleWrite(hasIfMatch, "", "object"))
				return
			}
			if err != nil {
				writeProblem(c, lostRace(err))
				return
			}
			// A finalizer keeps the object until the controller has cleaned
			// up: say so with 202 and the object as it now is.
			after := k.newObj()
			if err := s.live.Get(ctx, key, after); err == nil && after.GetUID() == uid {
				s.respond(c, k, http.StatusAccepted, after)
				return
			}
			c.Status(http.StatusNoContent)
			return
		}
	}
}

// readJSON reads an object's JSON body as UTF-8 text: a charset in
// Content-Type other than UTF-8 is refused, a byte order mark dropped, and
// text that is not valid Unicode refused, each before any decoding.
func (s *Server) readJSON(c *gin.Context) ([]byte, *Problem) {
	if p := checkJSONCharset(c.GetHeader("Content-Type")); p != nil {
		return nil, p
	}
	body, p := s.readBody(c, s.opts.MaxObjectBytes)
	if p == nil {
		body, p = jsonText(body)
	}
	if p == nil {
		p = checkUTF8(body)
	}
	return body, p
}

// readObject reads and strictly decodes a create or replace body.
func (s *Server) readObject(c *gin.Context, k *kind) (client.Object, *Problem) {
	if mt := mediaType(c.GetHeader("Content-Type")); mt != "" && mt != "application/json" {
		return nil, unsupportedMediaType("the body must be application/json, not %q", mt)
	}
	body, p := s.readJSON(c)
	if p != nil {
		return nil, p
	}
	in := k.newObj()
	if p := decodeStrict(body, in); p != nil {
		return nil, p
	}
	if p := checkTypeMeta(k, in); p != nil {
		return nil, p
	}
	if ns := in.GetNamespace(); ns != "" && ns != c.Param("ns") {
		return nil, badRequestField("metadata.namespace", ns, "must match the namespace in the path, "+c.Param("ns"))
	}
	return in, nil
}

// readBody reads at most limit bytes; a longer body is a 413.
func (s *Server) readBody(c *gin.Context, limit int64) ([]byte, *Problem) {
	if c.Request.ContentLength > limit {
		return nil, tooLarge("the body is %d bytes, the limit is %d", c.Request.ContentLength, limit).naming("body", field.ErrorTypeTooLong, fmt.Sprintf("at most %d bytes", limit))
	}
	stop := s.watchBody(c)
	b, err := io.ReadAll(io.LimitReader(c.Request.Body, limit+1))
	stop()
	if err != nil {
		return nil, s.bodyReadProblem(c, "body", err)
	}
	if int64(len(b)) > limit {
		return nil, tooLarge("the body is larger than the limit of %d bytes", limit).naming("body", field.ErrorTypeTooLong, fmt.Sprintf("at most %d bytes", limit))
	}
	if len(b) == 0 {
		return nil, badRequest("the body is empty").naming("body", field.ErrorTypeRequired, "a JSON document is required")
	}
	return b, nil
}

// decodeStrict decodes JSON into obj, refusing unknown and duplicate fields
// with the field's path, as the apiserver's strict field validation does.
func decodeStrict(body []byte, obj any) *Problem {
	strict, err := sigsjson.UnmarshalStrict(body, obj, sigsjson.DisallowDuplicateFields, sigsjson.DisallowUnknownFields)
	if err != nil {
		return malformed(body, err, strictDecoder(obj))
	}
	if len(strict) == 0 {
		return nil
	}
	p := problem(http.StatusBadRequest, "unknown-field", "Unknown or duplicate field", "%s", errors.Join(strict...).Error())
	for _, e := range strict {
		msg := e.Error()
		f := msg
		if i := strings.IndexByte(msg, '"'); i >= 0 {
			f = strings.Trim(msg[i:], `"`)
		}
		typ := string(field.ErrorTypeNotSupported)
		if strings.HasPrefix(msg, "duplicate") {
			typ = string(field.ErrorTypeDuplicate)
		}
		p.Errors = append(p.Errors, FieldError{Field: f, Detail: msg, Type: typ})
	}
	return p
}

func checkTypeMeta(k *kind, obj client.Object) *Problem {
	gvk := obj.GetObjectKind().GroupVersionKind()
	if av := gvk.GroupVersion().String(); gvk.Version != "" && av != slessv1alpha1.SchemeGroupVersion.String() {
		return badRequestField("apiVersion", av, "must be "+slessv1alpha1.SchemeGroupVersion.String()+" or omitted")
	}
	if gvk.Kind != "" && gvk.Kind != k.kind {
		return badRequestField("kind", gvk.Kind, "must be "+k.kind+" or omitted")
	}
	return nil
}

func badRequestField(path, value, detail string) *Problem {
	return invalidField(field.Invalid(field.NewPath(path), value, detail))
}

func invalidField(e *field.Error) *Problem {
	return invalid("The request", field.ErrorList{e})
}

func internal(err error) *Problem {
	return problem(http.StatusInternalServerError, "internal", "Internal error", "%v", err)
}

// fresh is the object a create stores: the name, labels and annotations and
// the spec of the body; every other metadata field and the status are the
// server's to set.
func (s *Server) fresh(k *kind, ns string, in client.Object) client.Object {
	obj := k.newObj()
	obj.SetName(in.GetName())
	obj.SetNamespace(ns)
	obj.SetLabels(in.GetLabels())
	obj.SetAnnotations(in.GetAnnotations())
	k.copyUser(obj, in)
	return obj
}

// admit validates an object about to be written: metadata, the shared
// validation, and what only the API can check (a Function's source).
func (s *Server) admit(ctx context.Context, k *kind, ns string, old, obj client.Object) *Problem {
	md := field.NewPath("metadata")
	errs := metav1validation.ValidateLabels(obj.GetLabels(), md.Child("labels"))
	errs = append(errs, apivalidation.ValidateAnnotations(obj.GetAnnotations(), md.Child("annotations"))...)
	errs = append(errs, k.validate(obj)...)
	errs = append(errs, checkPayloadNumbers(obj)...)
	if len(errs) > 0 {
		return invalid(k.kind, errs)
	}
	if k.built != nil {
		var oldW slessv1alpha1.Workload
		if old != nil {
			oldW = old.(slessv1alpha1.Workload)
		}
		if f := s.opts.Unsupported; f != nil {
			if e := f(obj.(slessv1alpha1.Workload)); e != nil {
				p := problem(http.StatusBadRequest, "invalid", "Invalid", "%s %q is invalid: %s", k.kind, obj.GetName(), e.Detail)
				p.Errors = append(p.Errors, FieldError{Field: e.Field, Detail: e.Detail, Type: string(e.Type)})
				return p
			}
		}
		if p := s.checkMaximums(ctx, k, ns, oldW, obj.(slessv1alpha1.Workload)); p != nil {
			return p
		}
		return s.checkSource(ctx, k, ns, oldW, obj.(slessv1alpha1.Workload))
	}
	return nil
}

// checkMaximums refuses resources over the namespace's maximums, on a
// create or a change of spec only, as the admission policy does.
func (s *Server) checkMaximums(ctx context.Context, k *kind, ns string, old, w slessv1alpha1.Workload) *Problem {
	if s.opts.Maximums == nil {
		return nil
	}
	// Compared as stored, defaults filled: a body may leave out what the
	// apiserver defaults, and the policy sees both sides defaulted.
	defaulted := func(w slessv1alpha1.Workload) *slessv1alpha1.FunctionSpec {
		d := w.DeepCopyObject().(slessv1alpha1.Workload)
		d.SetDefaults()
		return d.BuildSpec()
	}
	var oldSpec any
	if old != nil {
		oldSpec = defaulted(old)
	}
	if !limits.Applies(oldSpec, defaulted(w)) {
		return nil
	}
	m, err := s.opts.Maximums.Maximums(ctx, ns)
	var malformed *limits.MalformedError
	switch {
	case errors.As(err, &malformed):
		return problem(http.StatusBadRequest, "invalid", "Invalid", "%s", malformed.Error())
	case err != nil:
		return storeProblem(err)
	}
	if e := m.Check(&w.BuildSpec().WorkloadSpec); e != nil {
		p := problem(http.StatusBadRequest, "invalid", "Invalid", "%s %q is invalid: %s", k.kind, w.GetName(), e.Detail)
		p.Errors = append(p.Errors, FieldError{Field: e.Field, Detail: e.Detail, Type: string(e.Type)})
		return p
	}
	return nil
}

// checkName answers a malformed object name in the path before any lookup.
func checkName(k *kind, name string) *Problem {
	var msgs []string
	if k.dns1035 {
		msgs = validation.IsDNS1035Label(name)
	} else {
		msgs = validation.IsDNS1123Label(name)
	}
	if len(name) > k.maxName {
		msgs = append(msgs, fmt.Sprintf("must be at most %d characters", k.maxName))
	}
	if len(msgs) > 0 {
		return badRequestField("name", name, strings.Join(msgs, "; "))
	}
	return nil
}

// render is an object as the API shows it: with apiVersion and kind, and
// without managedFields, which are the apiserver's bookkeeping.
func (s *Server) render(k *kind, obj client.Object) ([]byte, error) {
	obj.GetObjectKind().SetGroupVersionKind(slessv1alpha1.SchemeGroupVersion.WithKind(k.kind))
	obj.SetManagedFields(nil)
	return json.Marshal(obj)
}

func (s *Server) respond(c *gin.Context, k *kind, status int, obj client.Object) {
	b, err := s.render(k, obj)
	if err != nil {
		writeProblem(c, internal(err))
		return
	}
	c.Header("ETag", etag(obj))
	c.Data(status, "application/json", b)
}

// etag is the strong entity tag of an object: its resourceVersion, quoted.
func etag(obj client.Object) string { return `"` + obj.GetResourceVersion() + `"` }

// listed tells whether an If-Match or If-None-Match header lists tag, or
// "*". If-Match compares strongly, so a weak W/ tag never matches (RFC 9110
// 13.1.1); If-None-Match weakly, so it does (13.1.2).
func listed(header []string, tag string, weak bool) bool {
	for _, h := range header {
		for _, t := range strings.Split(h, ",") {
			t = strings.TrimSpace(t)
			if weak {
				t = strings.TrimPrefix(t, "W/")
			}
			if t == "*" || t == tag {
				return true
			}
		}
	}
	return false
}

// notModified answers a GET or HEAD whose If-None-Match names the current
// tag with 304 and that tag, and says whether it did.
func notModified(c *gin.Context, tag string) bool {
	h, ok := c.Request.Header["If-None-Match"]
	if !ok || !listed(h, tag, true) {
		return false
	}
	c.Header("ETag", tag)
	c.Status(http.StatusNotModified)
	c.Abort()
	return true
}

// checkPreconditions refuses a write the request's If-Match or
// If-None-Match does not allow against cur, the object as stored now.
func checkPreconditions(c *gin.Context, cur client.Object) *Problem {
	if h, ok := c.Request.Header["If-Match"]; ok && !etagMatches(h, cur.GetResourceVersion()) {
		return preconditionFailed("If-Match %s does not match the current version %s", strings.Join(h, ", "), etag(cur))
	}
	return checkIfNoneMatch(c, cur.GetResourceVersion())
}

// checkWrite refuses a write to cur that the request rules out: its
// preconditions, a stale resourceVersion in the body, or an object being
// deleted (which the client may retry once it is gone). noun names the
// object in messages about its version.
func checkWrite(c *gin.Context, cur client.Object, bodyRV, kind, noun string) *Problem {
	if p := checkPreconditions(c, cur); p != nil {
		return p
	}
	if bodyRV != "" && bodyRV != cur.GetResourceVersion() {
		return conflict("metadata.resourceVersion %s is not the current version %s: read the %s again", bodyRV, cur.GetResourceVersion(), noun)
	}
	if cur.GetDeletionTimestamp() != nil {
		return conflict("%s %q is being deleted", kind, cur.GetName()).withRetry(retryAfterDeleting)
	}
	return nil
}

// staleWrite answers a write the store refused as a conflict when the
// client named the version it changes, by If-Match (412) or by a
// resourceVersion in the body (409): that version is gone. It is nil when
// the client named none, so the write may read again and retry.
func staleWrite(hasIfMatch bool, bodyRV, noun string) *Problem {
	switch {
	case hasIfMatch:
		return preconditionFailed("the %s changed after If-Match was checked", noun)
	case bodyRV != "":
		return conflict("metadata.resourceVersion %s is not the current version: read the %s again", bodyRV, noun)
	}
	return nil
}

// deletePreconditions make a delete remove cur and no object made under its
// name meanwhile, and with If-Match only the version that was checked.
func deletePreconditions(cur client.Object, hasIfMatch bool) client.Preconditions {
	uid, rv := cur.GetUID(), cur.GetResourceVersion()
	pre := client.Preconditions{UID: &uid}
	if hasIfMatch {
		pre.ResourceVersion = &rv
	}
	return pre
}

// checkIfNoneMatch refuses a write whose If-None-Match names the object's
// current version, or is "*" (the object exists): the client asked for the
// change only if the object is not (or no longer) as it names.
func checkIfNoneMatch(c *gin.Context, rv string) *Problem {
	h, ok := c.Request.Header["If-None-Match"]
	if !ok || !listed(h, `"`+rv+`"`, true) {
		return nil
	}
	return preconditionFailed("If-None-Match %s matches the current version \"%s\"", strings.Join(h, ", "), rv)
}

// etagMatches implements If-Match (RFC 9110 13.1.1) against a
// resourceVersion.
func etagMatches(header []string, rv string) bool { return listed(header, `"`+rv+`"`, false) }

func mediaType(ct string) string {
	mt, _, _ := strings.Cut(ct, ";")
	return strings.ToLower(strings.TrimSpace(mt))
}

// reflectInto copies src into dst; both are the same typed object.
//
// By reflection rather than a switch on the kinds: a switch silently
// copied nothing for a kind added to the table and not to it.
func reflectInto(dst, src client.Object) {
	reflect.ValueOf(dst).Elem().Set(reflect.ValueOf(src).Elem())
}
