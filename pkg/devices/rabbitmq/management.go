package rabbitmq

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/sless-dev/sless/pkg/devices"
)

// Management reaches RabbitMQ's management API (rabbitmq_management) as a
// user tagged administrator (or monitoring, for Connected alone).
type Management struct {
	// URL is the API's base, http://host:15672.
	URL                string
	Username, Password string
	HTTP               *http.Client
}

func (m *Management) do(ctx context.Context, method, path string, h http.Header) (*http.Response, error) {
	if m.URL == "" {
		return nil, fmt.Errorf("no RabbitMQ management URL is configured")
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(m.URL, "/")+path, nil)
	if err != nil {
		return nil, err
	}
	for k, v := range h {
		req.Header[k] = v
	}
	req.SetBasicAuth(m.Username, m.Password)
	c := m.HTTP
	if c == nil {
		c = &http.Client{Timeout: 10 * time.Second}
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("RabbitMQ management API: %w", err)
	}
	return resp, nil
}

// Disconnect closes every connection of username (none is no error).
func (m *Management) Disconnect(ctx context.Context, username string) error {
	// Path segments are escaped whole: a device's username holds a /.
	resp, err := m.do(ctx, http.MethodDelete, "/api/connections/username/"+url.PathEscape(username),
		http.Header{"X-Reason": {"sless: the device was disabled, deleted or given a new password"}})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK, http.StatusNoContent, http.StatusNotFound:
		return nil
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	return fmt.Errorf("RabbitMQ management API: DELETE connections of %s: %s %s", username, resp.Status, strings.TrimSpace(string(b)))
}

// Connected counts the devices with a live connection, per namespace.
func (m *Management) Connected(ctx context.Context) (map[string]int, error) {
	resp, err := m.do(ctx, http.MethodGet, "/api/connections?columns=user", nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("RabbitMQ management API: GET connections: %s %s", resp.Status, strings.TrimSpace(string(b)))
	}
	var conns []struct {
		User string `json:"user"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&conns); err != nil {
		return nil, fmt.Errorf("RabbitMQ management API: connections: %w", err)
	}
	seen := map[string]bool{}
	out := map[string]int{}
	for _, c := range conns {
		if ns, _, ok := devices.ParseUsername(c.User); ok && !seen[c.User] {
			seen[c.User] = true
			out[ns]++
		}
	}
	return out, nil
}
