package client

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/sless-dev/sless/pkg/secrets"
)

var secretsKind = kind[secrets.Info]{"secrets"}

// GetSecret reads a secret's keys and version; values never come back.
func (c *Client) GetSecret(ctx context.Context, ns, name string) (*secrets.Info, error) {
	return get(ctx, c, secretsKind, ns, name)
}

// AllSecrets lists every secret of a namespace, page after page.
func (c *Client) AllSecrets(ctx context.Context, ns string) ([]secrets.Info, error) {
	return listAll(ctx, c, secretsKind, ns, nil)
}

// CreateSecret stores a new secret. Values go as base64 (data), so any
// bytes pass.
func (c *Client) CreateSecret(ctx context.Context, ns, name string, data map[string][]byte) (*secrets.Info, error) {
	in := secrets.Input{Metadata: secrets.InputMetadata{Name: name}, Data: data}
	var out secrets.Info
	if err := c.sendJSON(ctx, http.MethodPost, secretsKind.collection(ns), "application/json", in, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// RotateSecret replaces every value of a secret. A non-empty ifMatch (the
// resourceVersion read before) makes the API refuse it, 412, if the secret
// changed since.
func (c *Client) RotateSecret(ctx context.Context, ns, name string, data map[string][]byte, ifMatch string) (*secrets.Info, error) {
	return c.writeSecret(ctx, http.MethodPut, "application/json", ns, name,
		secrets.Input{Metadata: secrets.InputMetadata{Name: name}, Data: data}, ifMatch)
}

// PatchSecret sets the values of set and removes the keys of remove,
// keeping the others.
func (c *Client) PatchSecret(ctx context.Context, ns, name string, set map[string][]byte, remove []string, ifMatch string) (*secrets.Info, error) {
	p := secrets.Patch{Data: map[string]*[]byte{}}
	for k, v := range set {
		p.Data[k] = &v
	}
	for _, k := range remove {
		p.Data[k] = nil
	}
	return c.writeSecret(ctx, http.MethodPatch, MergePatch, ns, name, p, ifMatch)
}

func (c *Client) writeSecret(ctx context.Context, method, contentType, ns, name string, in any, ifMatch string) (*secrets.Info, error) {
	b, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	r := request{method: method, path: secretsKind.item(ns, name), body: b, contentType: contentType}
	if ifMatch != "" {
		r.ifMatch = `"` + ifMatch + `"`
	}
	res, err := c.do(ctx, r)
	if err != nil {
		return nil, err
	}
	var out secrets.Info
	return &out, decode(res, &out)
}

// DeleteSecret deletes a secret.
func (c *Client) DeleteSecret(ctx context.Context, ns, name string) error {
	return remove(ctx, c, secretsKind, ns, name)
}
