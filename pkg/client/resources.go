package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
)

// Identity is who the token is, from GET /v1/whoami.
type Identity struct {
	Subject string `json:"subject"`
	// Namespace is the caller's tenant namespace.
	Namespace string `json:"namespace"`
	Admin     bool   `json:"admin,omitempty"`
}

// Whoami asks the API who the token is.
func (c *Client) Whoami(ctx context.Context) (*Identity, error) {
	var id Identity
	if err := c.getJSON(ctx, "/v1/whoami", nil, &id); err != nil {
		return nil, err
	}
	return &id, nil
}

// List is one page of a list; Next is the cursor of the following page, ""
// on the last.
type List[T any] struct {
	Items []T    `json:"items"`
	Next  string `json:"next,omitempty"`
}

// MergePatch is the content type of PATCH bodies (RFC 7396).
const MergePatch = "application/merge-patch+json"

// kind binds a resource type to its collection's name in the API's paths.
type kind[T any] struct{ plural string }

var (
	functions = kind[slessv1alpha1.Function]{"functions"}
	triggers  = kind[slessv1alpha1.Trigger]{"triggers"}
	jobs      = kind[slessv1alpha1.FunctionJob]{"jobs"}
	services  = kind[slessv1alpha1.SlessService]{"services"}
	devices   = kind[slessv1alpha1.IoTDevice]{"devices"}
)

func (k kind[T]) collection(ns string) string {
	return "/v1/namespaces/" + url.PathEscape(ns) + "/" + k.plural
}

func (k kind[T]) item(ns, name string) string {
	return k.collection(ns) + "/" + url.PathEscape(name)
}

func get[T any](ctx context.Context, c *Client, k kind[T], ns, name string) (*T, error) {
	var out T
	if err := c.getJSON(ctx, k.item(ns, name), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListOption narrows a list.
type ListOption func(url.Values)

// LabelSelector lists only the objects whose labels match sel, in Kubernetes
// label selector syntax: "app=web,tier!=db", "env in (a,b)", "!canary". The
// API answers a selector that does not parse with a 400.
func LabelSelector(sel string) ListOption {
	return func(q url.Values) {
		if sel != "" {
			q.Set("labelSelector", sel)
		}
	}
}

func list[T any](ctx context.Context, c *Client, k kind[T], ns, cursor string, limit int, opts []ListOption) (*List[T], error) {
	q := url.Values{}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	if limit > 0 {
		q.Set("limit", fmt.Sprint(limit))
	}
	for _, o := range opts {
		o(q)
	}
	var out List[T]
	if err := c.getJSON(ctx, k.collection(ns), q, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func listAll[T any](ctx context.Context, c *Client, k kind[T], ns string, opts []ListOption) ([]T, error) {
	var all []T
	cursor := ""
	for {
		page, err := list(ctx, c, k, ns, cursor, 0, opts)
		if err != nil {
			return nil, err
		}
		all = append(all, page.Items...)
		if page.Next == "" || page.Next == cursor {
			return all, nil
		}
		cursor = page.Next
	}
}

func create[T any](ctx context.Context, c *Client, k kind[T], ns string, obj *T) (*T, error) {
	var out T
	if err := c.sendJSON(ctx, http.MethodPost, k.collection(ns), "application/json", obj, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func patch[T any](ctx context.Context, c *Client, k kind[T], ns, name string, p any) (*T, error) {
	var out T
	if err := c.sendJSON(ctx, http.MethodPatch, k.item(ns, name), MergePatch, p, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func replace[T any](ctx context.Context, c *Client, k kind[T], ns, name string, obj *T) (*T, error) {
	var out T
	if err := c.sendJSON(ctx, http.MethodPut, k.item(ns, name), "application/json", obj, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func remove[T any](ctx context.Context, c *Client, k kind[T], ns, name string) error {
	_, err := c.do(ctx, request{method: http.MethodDelete, path: k.item(ns, name)})
	return err
}

// GetFunction reads one Function.
func (c *Client) GetFunction(ctx context.Context, ns, name string) (*slessv1alpha1.Function, error) {
	return get(ctx, c, functions, ns, name)
}

// ListFunctions reads one page of a namespace's Functions. Pass the same
// options with each page's cursor.
func (c *Client) ListFunctions(ctx context.Context, ns, cursor string, limit int, opts ...ListOption) (*List[slessv1alpha1.Function], error) {
	return list(ctx, c, functions, ns, cursor, limit, opts)
}

// AllFunctions reads every page of a namespace's Functions.
func (c *Client) AllFunctions(ctx context.Context, ns string, opts ...ListOption) ([]slessv1alpha1.Function, error) {
	return listAll(ctx, c, functions, ns, opts)
}

// AllServices reads every page of a namespace's SlessServices.
func (c *Client) AllServices(ctx context.Context, ns string, opts ...ListOption) ([]slessv1alpha1.SlessService, error) {
	return listAll(ctx, c, services, ns, opts)
}

// CreateService creates a SlessService in its namespace.
func (c *Client) CreateService(ctx context.Context, svc *slessv1alpha1.SlessService) (*slessv1alpha1.SlessService, error) {
	svc.APIVersion, svc.Kind = slessv1alpha1.SchemeGroupVersion.String(), slessv1alpha1.KindSlessService
	return create(ctx, c, services, svc.Namespace, svc)
}

// GetService reads one SlessService.
func (c *Client) GetService(ctx context.Context, ns, name string) (*slessv1alpha1.SlessService, error) {
	return get(ctx, c, services, ns, name)
}

// PatchService applies a JSON merge patch to a SlessService.
func (c *Client) PatchService(ctx context.Context, ns, name string, p any) (*slessv1alpha1.SlessService, error) {
	return patch(ctx, c, services, ns, name, p)
}

// DeleteService deletes a SlessService; a missing one is a 404 error.
func (c *Client) DeleteService(ctx context.Context, ns, name string) error {
	return remove(ctx, c, services, ns, name)
}

// CreateFunction creates fn in its namespace. A 409 for an object that still
// exists is an error at once (one being deleted is retried).
func (c *Client) CreateFunction(ctx context.Context, fn *slessv1alpha1.Function) (*slessv1alpha1.Function, error) {
	fn.APIVersion, fn.Kind = slessv1alpha1.SchemeGroupVersion.String(), "Function"
	return create(ctx, c, functions, fn.Namespace, fn)
}

// PatchFunction applies a JSON merge patch to a Function.
func (c *Client) PatchFunction(ctx context.Context, ns, name string, p any) (*slessv1alpha1.Function, error) {
	return patch(ctx, c, functions, ns, name, p)
}

// DeleteFunction deletes a Function; a missing one is a 404 error.
func (c *Client) DeleteFunction(ctx context.Context, ns, name string) error {
	return remove(ctx, c, functions, ns, name)
}

// Upload is the API's answer to a source upload.
type Upload struct {
	// Archive is what spec.source.archive says now or, for a Function not
	// created yet, what to name in it when creating the Function.
	Archive slessv1alpha1.ArchiveSource `json:"archive"`
	// Changed is false when the Function already had this archive: nothing
	// was written and no build starts.
	Changed bool `json:"changed"`
	// Function is the Function after the upload, when it exists.
	Function *slessv1alpha1.Function `json:"function,omitempty"`
	// Service is the SlessService after an upload to one that exists.
	Service *slessv1alpha1.SlessService `json:"service,omitempty"`
	// Message says what to do next when nothing was deployed.
	Message string `json:"message,omitempty"`
}

// PutSource uploads a zip as a Function's source. The API validates and
// stores it; for an existing Function it points spec.source.archive at it,
// for one not created yet it says which archive to create it with.
func (c *Client) PutSource(ctx context.Context, ns, name string, zip []byte, opts ...UploadOption) (*Upload, error) {
	return c.putSource(ctx, functions.item(ns, name), zip, opts)
}

// PutServiceSource uploads a zip as a SlessService's source, as PutSource
// does for a Function.
func (c *Client) PutServiceSource(ctx context.Context, ns, name string, zip []byte, opts ...UploadOption) (*Upload, error) {
	return c.putSource(ctx, services.item(ns, name), zip, opts)
}

func (c *Client) putSource(ctx context.Context, item string, zip []byte, opts []UploadOption) (*Upload, error) {
	q := url.Values{}
	for _, o := range opts {
		o(q)
	}
	res, err := c.do(ctx, request{method: http.MethodPut, path: item + "/source", query: q, body: zip, contentType: "application/zip"})
	if err != nil {
		return nil, err
	}
	var up Upload
	if err := decode(res, &up); err != nil {
		return nil, err
	}
	if up.Archive.SHA256 == "" {
		return nil, fmt.Errorf("the API's answer to the upload names no archive")
	}
	return &up, nil
}

// UploadOption changes what an upload sets besides the code.
type UploadOption func(url.Values)

// WithRuntime sets the Function's runtime together with its code.
func WithRuntime(runtime string) UploadOption {
	return func(q url.Values) { q.Set("runtime", runtime) }
}

// WithEntrypoint sets the Function's entrypoint together with its code.
func WithEntrypoint(entrypoint string) UploadOption {
	return func(q url.Values) { q.Set("entrypoint", entrypoint) }
}

// GetSource downloads a Function's source zip.
func (c *Client) GetSource(ctx context.Context, ns, name string) ([]byte, error) {
	res, err := c.do(ctx, request{method: http.MethodGet, path: functions.item(ns, name) + "/source", accept: "application/zip", maxAnswer: maxSourceAnswer})
	if err != nil {
		return nil, err
	}
	return res.body, nil
}

// GetTrigger reads one Trigger.
func (c *Client) GetTrigger(ctx context.Context, ns, name string) (*slessv1alpha1.Trigger, error) {
	return get(ctx, c, triggers, ns, name)
}

// CreateTrigger creates t in its namespace.
func (c *Client) CreateTrigger(ctx context.Context, t *slessv1alpha1.Trigger) (*slessv1alpha1.Trigger, error) {
	t.APIVersion, t.Kind = slessv1alpha1.SchemeGroupVersion.String(), "Trigger"
	return create(ctx, c, triggers, t.Namespace, t)
}

// PatchTrigger applies a JSON merge patch to a Trigger.
func (c *Client) PatchTrigger(ctx context.Context, ns, name string, p any) (*slessv1alpha1.Trigger, error) {
	return patch(ctx, c, triggers, ns, name, p)
}

// ReplaceTrigger replaces a Trigger's spec, labels and annotations with
// t's (PUT). A t.ResourceVersion that is no longer current is a 409.
func (c *Client) ReplaceTrigger(ctx context.Context, t *slessv1alpha1.Trigger) (*slessv1alpha1.Trigger, error) {
	t.APIVersion, t.Kind = slessv1alpha1.SchemeGroupVersion.String(), "Trigger"
	return replace(ctx, c, triggers, t.Namespace, t.Name, t)
}

// DeleteTrigger deletes a Trigger.
func (c *Client) DeleteTrigger(ctx context.Context, ns, name string) error {
	return remove(ctx, c, triggers, ns, name)
}

// GetJob reads one FunctionJob.
func (c *Client) GetJob(ctx context.Context, ns, name string) (*slessv1alpha1.FunctionJob, error) {
	return get(ctx, c, jobs, ns, name)
}

// CreateJob creates j in its namespace.
func (c *Client) CreateJob(ctx context.Context, j *slessv1alpha1.FunctionJob) (*slessv1alpha1.FunctionJob, error) {
	j.APIVersion, j.Kind = slessv1alpha1.SchemeGroupVersion.String(), "FunctionJob"
	return create(ctx, c, jobs, j.Namespace, j)
}

// PatchJob applies a JSON merge patch to a FunctionJob.
func (c *Client) PatchJob(ctx context.Context, ns, name string, p any) (*slessv1alpha1.FunctionJob, error) {
	return patch(ctx, c, jobs, ns, name, p)
}

// ReplaceJob replaces a FunctionJob's spec, labels and annotations with
// j's (PUT). A j.ResourceVersion that is no longer current is a 409.
func (c *Client) ReplaceJob(ctx context.Context, j *slessv1alpha1.FunctionJob) (*slessv1alpha1.FunctionJob, error) {
	j.APIVersion, j.Kind = slessv1alpha1.SchemeGroupVersion.String(), "FunctionJob"
	return replace(ctx, c, jobs, j.Namespace, j.Name, j)
}

// DeleteJob deletes a FunctionJob.
func (c *Client) DeleteJob(ctx context.Context, ns, name string) error {
	return remove(ctx, c, jobs, ns, name)
}
