package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/sless-dev/sless/pkg/api"
	"github.com/sless-dev/sless/pkg/local/serving"
)

func withVolume(body map[string]any, vol map[string]any) map[string]any {
	body["spec"].(map[string]any)["volumes"] = []any{vol}
	return body
}

// A back end that cannot mount a PersistentVolumeClaim (sless dev) refuses
// one on write with the field and why; the volumes it can mount pass, and
// the shared validation's refusals come first, with their own words.
func TestUnsupportedVolumesRefusedOnWrite(t *testing.T) {
	e := newEnv(t, func(o *api.Options) { o.Unsupported = serving.Unsupported })
	tok := e.token("alice")
	claim := map[string]any{"name": "data", "mountPath": "/data", "persistentVolumeClaim": map[string]any{"claimName": "data"}}
	r := e.do("POST", e.path("functions"), tok, withVolume(pythonFunction("claims"), claim))
	want(t, r, http.StatusBadRequest)
	p := r.problem(t)
	if len(p.Errors) != 1 || p.Errors[0].Field != "spec.volumes[0].persistentVolumeClaim" || !strings.Contains(p.Errors[0].Detail, "local mode has no PersistentVolumeClaims") {
		t.Fatalf("a claim: %+v", p)
	}
	scratch := map[string]any{"name": "scratch", "mountPath": "/scratch", "emptyDir": map[string]any{"sizeLimit": "64Mi"}}
	r = e.do("POST", e.path("functions"), tok, withVolume(pythonFunction("scratch"), scratch))
	want(t, r, http.StatusCreated)
	r = e.do("PUT", e.path("functions", "scratch"), tok, withVolume(pythonFunction("scratch"), claim))
	want(t, r, http.StatusBadRequest)

	for _, tc := range []struct {
		name  string
		vol   map[string]any
		field string
		msg   string
	}{
		{"over the code", map[string]any{"name": "a", "mountPath": "/sless/function", "emptyDir": map[string]any{}}, "spec.volumes[0].mountPath", "must not cover the runtime's own paths"},
		{"relative", map[string]any{"name": "a", "mountPath": "data", "emptyDir": map[string]any{}}, "spec.volumes[0].mountPath", "absolute, clean path"},
		{"two sources", map[string]any{"name": "a", "mountPath": "/a", "emptyDir": map[string]any{}, "secret": map[string]any{"secretName": "s"}}, "spec.volumes[0]", "exactly one of"},
		{"no secret name", map[string]any{"name": "a", "mountPath": "/a", "secret": map[string]any{}}, "spec.volumes[0].secret.secretName", "must name a Secret"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do("POST", e.path("functions"), tok, withVolume(pythonFunction("bad"), tc.vol))
			want(t, r, http.StatusBadRequest)
			p := r.problem(t)
			found := false
			for _, fe := range p.Errors {
				found = found || (fe.Field == tc.field && strings.Contains(fe.Detail, tc.msg))
			}
			if !found {
				t.Errorf("want %q on %s, got %+v", tc.msg, tc.field, p)
			}
		})
	}
}
