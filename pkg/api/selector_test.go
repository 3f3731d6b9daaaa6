package api_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"testing"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	slessclient "github.com/sless-dev/sless/pkg/client"
)

// TestListLabelSelector lists objects with different labels through
// ?labelSelector= and expects exactly the matching names, for each kind, on
// one page and across pages of one, and through the Go client.
func TestListLabelSelector(t *testing.T) {
	e := newEnv(t)
	tok := e.token("alice")
	withLabels := func(body map[string]any, labels map[string]any) map[string]any {
		body["metadata"].(map[string]any)["labels"] = labels
		return body
	}
	fnLabels := map[string]map[string]any{
		"web-a":  {"app": "web", "tier": "frontend", "env": "prod"},
		"web-b":  {"app": "web", "tier": "db", "env": "staging"},
		"api-c":  {"app": "api", "tier": "backend", "env": "prod", "canary": "true"},
		"bare-d": nil,
	}
	for name, l := range fnLabels {
		want(t, e.do("POST", e.path("functions"), tok, withLabels(pythonFunction(name), l)), http.StatusCreated)
	}
	for name, l := range map[string]map[string]any{"t-web": {"app": "web"}, "t-api": {"app": "api"}, "t-none": nil} {
		want(t, e.do("POST", e.path("triggers"), tok, withLabels(trgWith(name, map[string]any{"function": "web-a", "type": "http"}), l)), http.StatusCreated)
	}
	for name, l := range map[string]map[string]any{"j-nightly": {"run": "nightly", "env": "prod"}, "j-adhoc": {"run": "adhoc"}} {
		want(t, e.do("POST", e.path("jobs"), tok, withLabels(jobWith(name, map[string]any{"function": "web-a"}), l)), http.StatusCreated)
	}

	tests := []struct {
		kind     string
		selector string
		want     []string
	}{
		{"functions", "", []string{"api-c", "bare-d", "web-a", "web-b"}},
		{"functions", "app=web", []string{"web-a", "web-b"}},
		{"functions", "app==web", []string{"web-a", "web-b"}},
		{"functions", "app=web,tier!=db", []string{"web-a"}},
		// != and notin match objects without the key, as in Kubernetes.
		{"functions", "tier!=db", []string{"api-c", "bare-d", "web-a"}},
		{"functions", "env in (prod,staging)", []string{"api-c", "web-a", "web-b"}},
		{"functions", "env in (staging)", []string{"web-b"}},
		{"functions", "app notin (web)", []string{"api-c", "bare-d"}},
		{"functions", "!canary", []string{"bare-d", "web-a", "web-b"}},
		{"functions", "canary", []string{"api-c"}},
		{"functions", "env=prod,!canary", []string{"web-a"}},
		{"functions", "app=nothing", nil},
		{"triggers", "app", []string{"t-api", "t-web"}},
		{"triggers", "!app", []string{"t-none"}},
		{"triggers", "app in (web)", []string{"t-web"}},
		{"jobs", "run=nightly", []string{"j-nightly"}},
		{"jobs", "env", []string{"j-nightly"}},
		{"jobs", "run notin (nightly,adhoc)", nil},
	}
	type listed struct {
		Items []struct {
			Metadata struct{ Name string } `json:"metadata"`
		} `json:"items"`
		Next string `json:"next"`
	}
	for _, tc := range tests {
		t.Run(tc.kind+" "+tc.selector, func(t *testing.T) {
			q := url.Values{}
			if tc.selector != "" {
				q.Set("labelSelector", tc.selector)
			}
			r := e.do("GET", e.path(tc.kind)+"?"+q.Encode(), tok, nil)
			want(t, r, http.StatusOK)
			var got []string
			l := decode[listed](t, r)
			for _, it := range l.Items {
				got = append(got, it.Metadata.Name)
			}
			if !slices.Equal(got, tc.want) || l.Next != "" {
				t.Fatalf("one page: %v (next %q), want %v", got, l.Next, tc.want)
			}

			// Pages of one, the selector passed with each cursor.
			got = nil
			for cursor, pages := "", 0; ; pages++ {
				if pages > len(tc.want)+1 {
					t.Fatalf("more pages than matches: %v", got)
				}
				q.Set("limit", "1")
				if cursor != "" {
					q.Set("cursor", cursor)
				}
				r := e.do("GET", e.path(tc.kind)+"?"+q.Encode(), tok, nil)
				want(t, r, http.StatusOK)
				l := decode[listed](t, r)
				for _, it := range l.Items {
					got = append(got, it.Metadata.Name)
				}
				if cursor = l.Next; cursor == "" {
					break
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("pages of one: %v, want %v", got, tc.want)
			}
		})
	}

	// The Go client passes the selector on every page.
	c, err := slessclient.New(e.url, tok)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	names := func(fns []slessv1alpha1.Function) []string {
		var out []string
		for _, f := range fns {
			out = append(out, f.Name)
		}
		return out
	}
	all, err := c.AllFunctions(ctx, e.ns, slessclient.LabelSelector("env in (prod),app!=api"))
	if err != nil || !slices.Equal(names(all), []string{"web-a"}) {
		t.Fatalf("AllFunctions: %v %v", names(all), err)
	}
	page, err := c.ListFunctions(ctx, e.ns, "", 1, slessclient.LabelSelector("app=web"))
	if err != nil || !slices.Equal(names(page.Items), []string{"web-a"}) || page.Next == "" {
		t.Fatalf("first page: %v next %q: %v", names(page.Items), page.Next, err)
	}
	page, err = c.ListFunctions(ctx, e.ns, page.Next, 1, slessclient.LabelSelector("app=web"))
	if err != nil || !slices.Equal(names(page.Items), []string{"web-b"}) {
		t.Fatalf("second page: %v: %v", names(page.Items), err)
	}
	if all, err := c.AllFunctions(ctx, e.ns); err != nil || len(all) != len(fnLabels) {
		t.Fatalf("AllFunctions without a selector: %d %v", len(all), err)
	}
	_, err = c.AllFunctions(ctx, e.ns, slessclient.LabelSelector("app in (web"))
	var apiErr *slessclient.Error
	if slessclient.StatusOf(err) != http.StatusBadRequest || !errors.As(err, &apiErr) ||
		len(apiErr.Fields) != 1 || apiErr.Fields[0].Field != "labelSelector" {
		t.Fatalf("bad selector through the client: %v", err)
	}
}
