package controller

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/rest"
)

// samples is one scrape of a Prometheus text endpoint: each series, its
// name with labels as written, mapped to its value.
type samples map[string]float64

var labelPair = regexp.MustCompile(`(\w+)="([^"]*)"`)

func scrape(ctx context.Context, c *http.Client, url string) (samples, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return nil, fmt.Errorf("scrape %s: %s: %s", url, resp.Status, b)
	}
	s := samples{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		s[line[:i]] += v
	}
	return s, sc.Err()
}

// sum adds the series of metric name whose labels include all of match.
func (s samples) sum(name string, match map[string]string) float64 {
	var total float64
	for series, v := range s {
		if n, _, _ := strings.Cut(series, "{"); n != name {
			continue
		}
		if matches(series, match) {
			total += v
		}
	}
	return total
}

func matches(series string, match map[string]string) bool {
	labels := seriesLabels(series)
	for k, v := range match {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func seriesLabels(series string) map[string]string {
	labels := map[string]string{}
	if _, rest, ok := strings.Cut(series, "{"); ok {
		for _, m := range labelPair.FindAllStringSubmatch(rest, -1) {
			labels[m[1]] = m[2]
		}
	}
	return labels
}

// by sums metric name between two scrapes, grouped by the values of keys.
func by(before, after samples, name string, keys ...string) map[string]float64 {
	out := map[string]float64{}
	for series, v := range after {
		if n, _, _ := strings.Cut(series, "{"); n != name {
			continue
		}
		if d := v - before[series]; d != 0 {
			labels := seriesLabels(series)
			var parts []string
			for _, k := range keys {
				if labels[k] != "" {
					parts = append(parts, labels[k])
				}
			}
			out[strings.Join(parts, " ")] += d
		}
	}
	return out
}

// apiserver scrapes the control plane's own /metrics with the test's admin
// credentials.
type apiserver struct {
	client *http.Client
	url    string
}

func newAPIServer(cfg *rest.Config) (*apiserver, error) {
	c, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	return &apiserver{client: c, url: strings.TrimSuffix(cfg.Host, "/") + "/metrics"}, nil
}

func (a *apiserver) scrape(ctx context.Context) (samples, error) { return scrape(ctx, a.client, a.url) }

// requests is the apiserver's apiserver_request_total between two scrapes,
// by verb and resource (with subresource and response code when they
// matter), the largest first; WATCH streams and the bench's own polling
// are in it, as they are on a cluster.
type requests map[string]float64

// verbs names the apiserver's verbs as RBAC and kubectl do.
var verbs = map[string]string{"POST": "create", "PUT": "update", "PATCH": "patch", "APPLY": "apply", "GET": "get",
	"LIST": "list", "WATCH": "watch", "WATCHLIST": "watch", "DELETE": "delete", "DELETECOLLECTION": "deletecollection", "CONNECT": "connect"}

func requestsBetween(before, after samples) requests {
	r := requests{}
	for series, v := range after {
		if n, _, _ := strings.Cut(series, "{"); n != "apiserver_request_total" {
			continue
		}
		d := v - before[series]
		if d == 0 {
			continue
		}
		l := seriesLabels(series)
		key := verbs[l["verb"]] + " " + l["resource"]
		if l["group"] != "" {
			key += "." + l["group"]
		}
		if l["subresource"] != "" {
			key += "/" + l["subresource"]
		}
		if c := l["code"]; c != "" && c[0] != '2' {
			key += " (" + c + ")"
		}
		r[key] += d
	}
	return r
}

func (r requests) total() float64 {
	var t float64
	for _, v := range r {
		t += v
	}
	return t
}

// table writes the counts at least min, per item, largest first.
func (r requests) table(per float64, min float64) string {
	keys := make([]string, 0, len(r))
	for k := range r {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if r[a] != r[b] {
			if r[a] > r[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	var b strings.Builder
	for _, k := range keys {
		if r[k] < min {
			continue
		}
		fmt.Fprintf(&b, "    %-62s %7.0f  %6.2f per Function\n", k, r[k], r[k]/per)
	}
	return b.String()
}
