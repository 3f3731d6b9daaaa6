package invoke_test

import (
	"io"
	"net/http"
	"testing"

	"github.com/sless-dev/sless/pkg/invoke"
	"github.com/sless-dev/sless/pkg/invoke/invoketest"
)

// A tagged traffic target answers at /fn/{ns}/{name}@{tag} and on the host
// {tag}-{name}.{ns}.<domain>, under the function's access policy, and its
// calls are recorded with the tag's revision.
func TestProxyTags(t *testing.T) {
	r, base := hostRig(t)
	main, canary := make(chan seen, 10), make(chan seen, 10)
	r.targets.set("team-a", "hello", invoke.Target{Address: echo(t, main), Ready: true, Revision: "hello-00002"})
	r.targets.tag("team-a", "hello", "canary", invoke.Target{Address: echo(t, canary), Ready: true, Revision: "hello-00003"})
	// A function whose name looks like a tag of another is itself.
	beta := make(chan seen, 10)
	r.targets.set("team-a", "beta-hello", invoke.Target{Address: echo(t, beta), Ready: true, Revision: "beta-hello-00001"})
	r.targets.tag("team-a", "hello", "beta", invoke.Target{Address: echo(t, canary), Ready: true, Revision: "hello-00003"})
	cases := []struct {
		name, host, path string
		token            string
		status           int
		reason           string
		to               chan seen // which backend answers
		prefix           string    // PrefixHeader it sees
	}{
		{name: "by path", path: "/fn/team-a/hello@canary/x", token: "team-a:alice", status: 201, to: canary, prefix: "/fn/team-a/hello@canary"},
		{name: "the function itself", path: "/fn/team-a/hello/x", token: "team-a:alice", status: 201, to: main, prefix: "/fn/team-a/hello"},
		{name: "by host", host: "canary-hello.team-a.fn.test", path: "/x", token: "team-a:alice", status: 201, to: canary},
		{name: "unknown tag", path: "/fn/team-a/hello@nope", token: "team-a:alice", status: 404, reason: invoke.ReasonNotFound},
		{name: "unknown tag, no token", path: "/fn/team-a/hello@nope", status: 401, reason: invoke.ReasonUnauthorized},
		{name: "tag of another tenant", path: "/fn/team-a/hello@canary", token: "team-b:bob", status: 403, reason: invoke.ReasonForbidden},
		{name: "tag not a label", path: "/fn/team-a/hello@Canary", token: "team-a:alice", status: 404, reason: invoke.ReasonNotFound},
		{name: "empty tag", path: "/fn/team-a/hello@", token: "team-a:alice", status: 404, reason: invoke.ReasonNotFound},
		{name: "two tags", path: "/fn/team-a/hello@a@b", token: "team-a:alice", status: 404, reason: invoke.ReasonNotFound},
		{name: "a function's host before a tag's", host: "beta-hello.team-a.fn.test", path: "/x", token: "team-a:alice", status: 201, to: beta},
		{name: "host of no function and no tag", host: "gamma-hello.team-a.fn.test", path: "/", token: "team-a:alice", status: 404, reason: invoke.ReasonNotFound},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest("GET", base+tc.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.host != "" {
				req.Host = tc.host
			}
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			if tc.reason != "" {
				invoketest.Refusal(t, resp, tc.status, tc.reason)
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("%d %s", resp.StatusCode, b)
			}
			select {
			case c := <-tc.to:
				if c.Path != "/x" || c.Header.Get(invoke.PrefixHeader) != tc.prefix {
					t.Fatalf("the backend saw %s with prefix %q, want /x and %q", c.Path, c.Header.Get(invoke.PrefixHeader), tc.prefix)
				}
			default:
				t.Fatal("the other backend answered")
			}
		})
	}
	recs := r.records(t, "team-a", "hello", 3)
	got := map[string]int{}
	for _, rec := range recs {
		got[rec.Revision]++
	}
	if got["hello-00003"] != 2 || got["hello-00002"] != 1 {
		t.Errorf("records by revision %v, want 2 of the tag's and 1 of the function's", got)
	}
}
