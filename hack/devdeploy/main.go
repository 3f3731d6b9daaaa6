// Command devdeploy deploys a manifest (YAML or JSON) of a Function,
// SlessService, Trigger or FunctionJob to a running `sless dev` through its
// REST API. For a Function or SlessService it waits until it is Ready,
// calls it once and prints the answer and the URL; -dir DIR packs DIR as
// sless deploy and Terraform do (source.PackDir) and deploys it as its code.
// hack/run.sh (make run) uses it; it needs nothing but Go, so
// `make run` works where curl or PyYAML are missing.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/sless-dev/sless/pkg/source"
)

type function struct {
	Metadata struct {
		Name            string `json:"name"`
		Namespace       string `json:"namespace,omitempty"`
		ResourceVersion string `json:"resourceVersion,omitempty"`
		Generation      int64  `json:"generation,omitempty"`
	} `json:"metadata"`
	Status struct {
		ObservedGeneration int64  `json:"observedGeneration"`
		Phase              string `json:"phase"`
		URL                string `json:"url"`
		Conditions         []struct {
			Type, Status, Reason, Message string
		} `json:"conditions"`
	} `json:"status"`
}

// collections maps a manifest's kind onto the API's path segment.
var collections = map[string]string{"Function": "functions", "SlessService": "services", "Trigger": "triggers", "FunctionJob": "jobs"}

// label names the kinds that are built and served, in messages.
var label = map[string]string{"Function": "function", "SlessService": "service"}

func main() {
	base := flag.String("url", "http://127.0.0.1:8080", "base URL of sless dev")
	tokenFile := flag.String("token-file", ".data/dev-token", "file holding the dev token")
	file := flag.String("f", "", "manifest of a Function, SlessService, Trigger or FunctionJob (YAML or JSON)")
	dir := flag.String("dir", "", "pack this folder as sless deploy does and deploy it as the Function's or SlessService's code (spec.source.archive)")
	ns := flag.String("namespace", "default", "namespace to deploy into")
	query := flag.String("query", "", "query string of the test call, e.g. name=Ada")
	wait := flag.Duration("wait", 5*time.Minute, "how long to wait for Ready")
	flag.Parse()
	if err := run(*base, *tokenFile, *file, *dir, *ns, *query, *wait); err != nil {
		fmt.Fprintln(os.Stderr, "devdeploy:", err)
		os.Exit(1)
	}
}

func run(base, tokenFile, file, dir, ns, query string, wait time.Duration) error {
	if file == "" {
		return errors.New("-f is required")
	}
	tok, err := os.ReadFile(tokenFile)
	if err != nil {
		return err
	}
	token := strings.TrimSpace(string(tok))
	raw, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	body, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	var doc map[string]any
	if err := json.Unmarshal(body, &doc); err != nil {
		return err
	}
	meta, _ := doc["metadata"].(map[string]any)
	name, _ := meta["name"].(string)
	if name == "" {
		return fmt.Errorf("%s has no metadata.name", file)
	}
	meta["namespace"] = ns
	kind, _ := doc["kind"].(string)
	plural, ok := collections[kind]
	if !ok {
		return fmt.Errorf("%s: kind %q is not one sless serves (Function, SlessService, Trigger or FunctionJob)", file, kind)
	}
	what := label[kind]
	if dir != "" && what == "" {
		return fmt.Errorf("-dir: a %s has no source", kind)
	}
	col := strings.TrimSuffix(base, "/") + "/v1/namespaces/" + url.PathEscape(ns) + "/" + plural
	item := col + "/" + url.PathEscape(name)

	call := func(method, u string, in any) (int, []byte, error) {
		var rd io.Reader
		if in != nil {
			b, _ := json.Marshal(in)
			rd = bytes.NewReader(b)
		}
		req, err := http.NewRequest(method, u, rd)
		if err != nil {
			return 0, nil, err
		}
		localHost(req, base)
		req.Header.Set("Authorization", "Bearer "+token)
		if in != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, b, err
	}

	if dir != "" {
		archive, err := upload(item, token, base, dir, doc)
		if err != nil {
			return err
		}
		spec, _ := doc["spec"].(map[string]any)
		if spec == nil {
			spec = map[string]any{}
			doc["spec"] = spec
		}
		spec["source"] = map[string]any{"archive": archive}
	}

	// Create, or replace the spec of the one already there.
	code, cur, err := call(http.MethodGet, item, nil)
	if err != nil {
		return err
	}
	switch code {
	case http.StatusNotFound:
		code, cur, err = call(http.MethodPost, col, doc)
	case http.StatusOK:
		var existing function
		_ = json.Unmarshal(cur, &existing)
		meta["resourceVersion"] = existing.Metadata.ResourceVersion
		code, cur, err = call(http.MethodPut, item, doc)
	}
	if err != nil {
		return err
	}
	if code != http.StatusOK && code != http.StatusCreated {
		return fmt.Errorf("deploying %s %s: %d %s", kind, name, code, cur)
	}
	if what == "" {
		fmt.Printf("applied %s %s/%s\n", kind, ns, name)
		return nil
	}
	fmt.Printf("deployed %s %s/%s; waiting for it to be Ready\n", what, ns, name)

	deadline := time.Now().Add(wait)
	last := ""
	var fn function
	for {
		code, b, err := call(http.MethodGet, item, nil)
		if err != nil {
			return err
		}
		if code != http.StatusOK {
			return fmt.Errorf("reading %s: %d %s", name, code, b)
		}
		fn = function{}
		if err := json.Unmarshal(b, &fn); err != nil {
			return err
		}
		current := fn.Status.ObservedGeneration == fn.Metadata.Generation
		if current && fn.Status.Phase != last && fn.Status.Phase != "" {
			fmt.Printf("  %s\n", fn.Status.Phase)
			last = fn.Status.Phase
		}
		if current && fn.Status.Phase == "Ready" {
			break
		}
		if current && fn.Status.Phase == "Failed" {
			for _, c := range fn.Status.Conditions {
				if c.Status == "False" {
					fmt.Fprintf(os.Stderr, "  %s: %s: %s\n", c.Type, c.Reason, c.Message)
				}
			}
			return fmt.Errorf("%s %s failed", what, name)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s %s not Ready after %s (phase %q)", what, name, wait, fn.Status.Phase)
		}
		time.Sleep(200 * time.Millisecond)
	}

	u := fn.Status.URL
	if query != "" {
		u += "?" + query
	}
	// A restarted sless dev reports the function Ready from its store while
	// it brings the process back: 503 with Retry-After until then.
	var answer []byte
	for {
		code, answer, err = call(http.MethodGet, u, nil)
		if err != nil {
			return err
		}
		if code != http.StatusServiceUnavailable || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if code != http.StatusOK {
		return fmt.Errorf("calling %s: %d %s", u, code, answer)
	}
	fmt.Printf("\nGET %s\n%s\n", u, strings.TrimSpace(string(answer)))
	fmt.Printf("\n%s URL: %s\n", what, fn.Status.URL)
	fmt.Printf("call it:      curl -H \"Authorization: Bearer $(cat %s)\" '%s'\n", tokenFile, u)
	return nil
}

// upload packs dir and puts it as item's source with the manifest's runtime
// and entrypoint, returning the stored archive to name in spec.source.
func upload(item, token, base, dir string, doc map[string]any) (map[string]any, error) {
	packed, err := source.PackDir(dir)
	if err != nil {
		return nil, err
	}
	spec, _ := doc["spec"].(map[string]any)
	q := url.Values{}
	for _, k := range []string{"runtime", "entrypoint"} {
		if v, _ := spec[k].(string); v != "" {
			q.Set(k, v)
		}
	}
	req, err := http.NewRequest(http.MethodPut, item+"/source?"+q.Encode(), bytes.NewReader(packed.Zip))
	if err != nil {
		return nil, err
	}
	localHost(req, base)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/zip")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusCreated {
		return nil, fmt.Errorf("uploading %s: %d %s", dir, resp.StatusCode, b)
	}
	var up struct {
		Archive map[string]any `json:"archive"`
	}
	if err := json.Unmarshal(b, &up); err != nil || up.Archive == nil {
		return nil, fmt.Errorf("uploading %s: an answer naming no archive: %s", dir, b)
	}
	fmt.Printf("uploaded %s (%d files, sha256 %s)\n", dir, packed.Files, packed.SHA256)
	return up.Archive, nil
}

// localHost sends a request for a function host under localhost
// (status.url of sless dev) to base, naming the host in the request: curl
// and browsers resolve *.localhost to loopback themselves, Go's resolver
// does not.
func localHost(req *http.Request, base string) {
	b, err := url.Parse(base)
	if err != nil || !strings.HasSuffix(req.URL.Hostname(), ".localhost") {
		return
	}
	req.Host = req.URL.Host
	req.URL.Host = b.Host
}
