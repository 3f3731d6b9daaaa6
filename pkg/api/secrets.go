package api

import (
	"context"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sless-dev/sless/pkg/secrets"
)

// SecretList is the body of a secret list answer.
type SecretList struct {
	Items []secrets.Info `json:"items"`
	Next  string         `json:"next,omitempty"`
}

const secretKind = "Secret"

// secretRoutes serves /v1/namespaces/{ns}/secrets. Values go in, never out:
// every answer is a secrets.Info, and no log line or problem names a value.
func (s *Server) secretRoutes(nsr *gin.RouterGroup, get func(gin.IRoutes, string, ...gin.HandlerFunc)) {
	none := s.query()
	named := func(c *gin.Context) {
		if msgs := secrets.ValidateName(c.Param("name")); len(msgs) > 0 {
			writeProblem(c, badRequestField("name", c.Param("name"), strings.Join(msgs, "; ")))
		}
	}
	if s.opts.Secrets == nil {
		// The routes exist whatever the server keeps, as for invocations.
		off := func(c *gin.Context) {
			writeProblem(c, problem(http.StatusNotImplemented, "no-secrets", "No secret store",
				"this server was started without a secret store"))
		}
		get(nsr, "/secrets", off)
		nsr.POST("/secrets", off)
		for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPut, http.MethodPatch, http.MethodDelete} {
			nsr.Handle(m, "/secrets/:name", off)
		}
		return
	}
	get(nsr, "/secrets", s.query("limit", "cursor"), s.listSecrets)
	nsr.POST("/secrets", none, s.createSecret)
	get(nsr, "/secrets/:name", named, none, s.getSecret)
	nsr.PUT("/secrets/:name", named, none, s.rotateSecret)
	nsr.PATCH("/secrets/:name", named, none, s.patchSecret)
	nsr.DELETE("/secrets/:name", named, none, s.deleteSecret)
}

func (s *Server) listSecrets(c *gin.Context) {
	ns := c.Param("ns")
	limit, p := listLimit(c)
	if p != nil {
		writeProblem(c, p)
		return
	}
	of := listCursor{Kind: secretKind, Namespace: ns}
	opts := []client.ListOption{client.InNamespace(ns), client.Limit(limit), client.MatchingLabelsSelector{Selector: secrets.Selector()}}
	cur := c.Query("cursor")
	if cur != "" {
		token, ok := continueOf(cur, of)
		if !ok {
			writeProblem(c, badRequestField("cursor", cur, "not a cursor of this list: pass the next of the previous page"))
			return
		}
		opts = append(opts, client.Continue(token))
	}
	l := &corev1.SecretList{}
	if err := s.opts.Secrets.List(c.Request.Context(), l, opts...); err != nil {
		p := s.secretStoreProblem(err, "list secrets", ns, "")
		if p.Status == http.StatusBadRequest && cur != "" {
			p = badRequestField("cursor", cur, "not a cursor this API returned")
		}
		writeProblem(c, p)
		return
	}
	out := SecretList{Items: make([]secrets.Info, 0, len(l.Items))}
	if token := l.GetContinue(); token != "" {
		of.Continue = token
		out.Next = of.encode()
	}
	for i := range l.Items {
		if secrets.Managed(&l.Items[i]) {
			out.Items = append(out.Items, secrets.InfoOf(&l.Items[i]))
		}
	}
	c.JSON(http.StatusOK, out)
}

func (s *Server) getSecret(c *gin.Context) {
	sec, p := s.readSecret(c.Request.Context(), c.Param("ns"), c.Param("name"))
	if p != nil {
		writeProblem(c, p)
		return
	}
	if notModified(c, etag(sec)) {
		return
	}
	s.respondSecret(c, http.StatusOK, sec)
}

// readSecret reads a secret the API manages; any other Secret of the
// namespace is answered as missing, whatever it holds.
func (s *Server) readSecret(ctx context.Context, ns, name string) (*corev1.Secret, *Problem) {
	sec := &corev1.Secret{}
	if err := s.opts.Secrets.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, sec); err != nil {
		return nil, s.secretStoreProblem(err, "read secret", ns, name)
	}
	if !secrets.Managed(sec) {
		return nil, secretNotFound(name)
	}
	return sec, nil
}

func secretNotFound(name string) *Problem {
	return notFound("secret %q not found", name)
}

func (s *Server) createSecret(c *gin.Context) {
	ns := c.Param("ns")
	in, p := s.readSecretInput(c)
	if p != nil {
		writeProblem(c, p)
		return
	}
	if in.Metadata.Name == "" {
		writeProblem(c, invalid(secretKind, field.ErrorList{field.Required(field.NewPath("metadata", "name"), "")}))
		return
	}
	if msgs := secrets.ValidateName(in.Metadata.Name); len(msgs) > 0 {
		writeProblem(c, invalid(secretKind, field.ErrorList{field.Invalid(field.NewPath("metadata", "name"), in.Metadata.Name, strings.Join(msgs, "; "))}))
		return
	}
	if in.Metadata.ResourceVersion != "" {
		writeProblem(c, badRequestField("metadata.resourceVersion", in.Metadata.ResourceVersion, "must not be set on create"))
		return
	}
	data, p := inputData(in)
	if p != nil {
		writeProblem(c, p)
		return
	}
	if p := s.ensureTenant(c); p != nil {
		writeProblem(c, p)
		return
	}
	sec := secrets.Make(ns, in.Metadata.Name, data, time.Now())
	err := s.opts.Secrets.Create(c.Request.Context(), sec)
	if apierrors.IsNotFound(err) && ns == IdentityOf(c).Namespace && s.forgetTenant(c) {
		// The tenant's namespace, remembered as made, was deleted since.
		if p := s.ensureTenant(c); p != nil {
			writeProblem(c, p)
			return
		}
		err = s.opts.Secrets.Create(c.Request.Context(), sec)
	}
	if apierrors.IsAlreadyExists(err) {
		writeProblem(c, conflict("secret %q already exists: rotate it with PUT or PATCH", in.Metadata.Name))
		return
	}
	if err != nil {
		writeProblem(c, s.secretStoreProblem(err, "create secret", ns, ""))
		return
	}
	c.Header("Location", c.Request.URL.Path+"/"+sec.Name)
	s.respondSecret(c, http.StatusCreated, sec)
}

// rotateSecret replaces every value of a secret (PUT).
func (s *Server) rotateSecret(c *gin.Context) {
	name := c.Param("name")
	in, p := s.readSecretInput(c)
	if p != nil {
		writeProblem(c, p)
		return
	}
	if in.Metadata.Name != "" && in.Metadata.Name != name {
		writeProblem(c, badRequestField("metadata.name", in.Metadata.Name, "must match the name in the path, "+name))
		return
	}
	data, p := inputData(in)
	if p != nil {
		writeProblem(c, p)
		return
	}
	s.updateSecret(c, in.Metadata.ResourceVersion, func(map[string][]byte) (map[string][]byte, *Problem) { return data, nil })
}

// patchSecret sets the keys a merge patch gives and removes those it gives
// as null.
func (s *Server) patchSecret(c *gin.Context) {
	if mt := mediaType(c.GetHeader("Content-Type")); mt != MergePatchContentType {
		writeProblem(c, unsupportedMediaType("PATCH takes a JSON merge patch (Content-Type: %s), not %q", MergePatchContentType, mt))
		return
	}
	body, p := s.readJSON(c)
	if p != nil {
		writeProblem(c, p)
		return
	}
	var in secrets.Patch
	if p := decodeStrict(body, &in); p != nil {
		writeProblem(c, p)
		return
	}
	if p := checkInputMetadata(c, in.Metadata); p != nil {
		writeProblem(c, p)
		return
	}
	for k := range in.StringData {
		if _, ok := in.Data[k]; ok {
			writeProblem(c, invalid(secretKind, field.ErrorList{field.Duplicate(field.NewPath("data").Key(k), "the key is in stringData too; give it once")}))
			return
		}
	}
	s.updateSecret(c, in.Metadata.ResourceVersion, func(cur map[string][]byte) (map[string][]byte, *Problem) {
		next := make(map[string][]byte, len(cur))
		for k, v := range cur {
			next[k] = v
		}
		for k, v := range in.Data {
			if v == nil {
				delete(next, k)
			} else {
				next[k] = *v
			}
		}
		for k, v := range in.StringData {
			if v == nil {
				delete(next, k)
			} else {
				next[k] = []byte(*v)
			}
		}
		if errs := secrets.ValidateData(next, field.NewPath("data")); len(errs) > 0 {
			return nil, invalid(secretKind, errs)
		}
		return next, nil
	})
}

// updateSecret reads the secret uncached, checks the client's
// preconditions as readModifyWrite does for the other kinds, and writes the
// data next gives. A lost race without a precondition is retried.
func (s *Server) updateSecret(c *gin.Context, bodyRV string, next func(cur map[string][]byte) (map[string][]byte, *Problem)) {
	ctx := c.Request.Context()
	ns, name := c.Param("ns"), c.Param("name")
	_, hasIfMatch := c.Request.Header["If-Match"]
	retry := newRaceRetry()
	for {
		cur, p := s.readSecret(ctx, ns, name)
		if p != nil {
			writeProblem(c, p)
			return
		}
		if p := checkWrite(c, cur, bodyRV, "secret", "secret"); p != nil {
			writeProblem(c, p)
			return
		}
		data, p := next(cur.Data)
		if p != nil {
			writeProblem(c, p)
			return
		}
		upd := cur.DeepCopy()
		secrets.SetData(upd, data, time.Now())
		err := s.opts.Secrets.Update(ctx, upd)
		if err == nil {
			s.respondSecret(c, http.StatusOK, upd)
			return
		}
		if apierrors.IsConflict(err) {
			if p := staleWrite(hasIfMatch, bodyRV, "secret"); p != nil {
				writeProblem(c, p)
				return
			}
			if retry.again(ctx) {
				continue
			}
		}
		writeProblem(c, s.secretStoreProblem(err, "update secret", ns, name))
		return
	}
}

func (s *Server) deleteSecret(c *gin.Context) {
	ctx := c.Request.Context()
	ns, name := c.Param("ns"), c.Param("name")
	_, hasIfMatch := c.Request.Header["If-Match"]
	retry := newRaceRetry()
	for {
		cur, p := s.readSecret(ctx, ns, name)
		if p != nil {
			writeProblem(c, p)
			return
		}
		if p := checkPreconditions(c, cur); p != nil {
			writeProblem(c, p)
			return
		}
		// The UID keeps a Secret made under the same name meanwhile (perhaps
		// not the API's) from being deleted in this one's place.
		err := s.opts.Secrets.Delete(ctx, cur, deletePreconditions(cur, hasIfMatch))
		switch {
		case err == nil, apierrors.IsNotFound(err):
			c.Status(http.StatusNoContent)
			return
		case apierrors.IsConflict(err) && hasIfMatch:
			writeProblem(c, staleWrite(hasIfMatch, "", "secret"))
			return
		case apierrors.IsConflict(err) && retry.again(ctx):
			continue
		}
		writeProblem(c, s.secretStoreProblem(err, "delete secret", ns, name))
		return
	}
}

// readSecretInput reads and strictly decodes a create or rotate body.
func (s *Server) readSecretInput(c *gin.Context) (*secrets.Input, *Problem) {
	if mt := mediaType(c.GetHeader("Content-Type")); mt != "" && mt != "application/json" {
		return nil, unsupportedMediaType("the body must be application/json, not %q", mt)
	}
	body, p := s.readJSON(c)
	if p != nil {
		return nil, p
	}
	in := &secrets.Input{}
	if p := decodeStrict(body, in); p != nil {
		return nil, p
	}
	if p := checkInputMetadata(c, in.Metadata); p != nil {
		return nil, p
	}
	return in, nil
}

func checkInputMetadata(c *gin.Context, md secrets.InputMetadata) *Problem {
	if md.Namespace != "" && md.Namespace != c.Param("ns") {
		return badRequestField("metadata.namespace", md.Namespace, "must match the namespace in the path, "+c.Param("ns"))
	}
	return nil
}

// inputData is the values of in, stringData and data together, validated.
func inputData(in *secrets.Input) (map[string][]byte, *Problem) {
	data := make(map[string][]byte, len(in.Data)+len(in.StringData))
	var errs field.ErrorList
	for k, v := range in.Data {
		data[k] = v
	}
	keys := make([]string, 0, len(in.StringData))
	for k := range in.StringData {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if _, ok := data[k]; ok {
			errs = append(errs, field.Duplicate(field.NewPath("stringData").Key(k), "the key is in data too; give it once"))
		}
		data[k] = []byte(in.StringData[k])
	}
	errs = append(errs, secrets.ValidateData(data, field.NewPath("data"))...)
	if len(errs) > 0 {
		return nil, invalid(secretKind, errs)
	}
	return data, nil
}

func (s *Server) respondSecret(c *gin.Context, status int, sec *corev1.Secret) {
	c.Header("ETag", etag(sec))
	c.JSON(status, secrets.InfoOf(sec))
}

// secretStoreProblem is storeProblem for the secret store. A store error
// other than the usual ones is logged by what was asked, never with the
// object, which holds the values.
func (s *Server) secretStoreProblem(err error, what, ns, name string) *Problem {
	if apierrors.IsNotFound(err) {
		if name == "" {
			return notFound("namespace %q not found", ns)
		}
		return secretNotFound(name)
	}
	p := storeProblem(err)
	if p.Status >= 500 {
		s.log.Error(what, "namespace", ns, "name", name, "error", err)
	}
	return p
}
