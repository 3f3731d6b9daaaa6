package callback

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/sless-dev/sless/pkg/retry"
)

// DefaultTimeout bounds one delivery, answer included.
const DefaultTimeout = 10 * time.Second

// Sender posts results through a Policy's Client.
type Sender struct {
	Policy *Policy
	client *http.Client
}

// NewSender posts within p, each delivery bounded by timeout (0:
// DefaultTimeout); lookup nil resolves with the system's resolver.
func NewSender(p *Policy, timeout time.Duration, lookup Lookup) *Sender {
	if p == nil {
		p = &Policy{}
	}
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return &Sender{Policy: p, client: p.Client(timeout, lookup)}
}

// Post makes one delivery of body to rawURL, signed with key, and says
// what the receiver answered (0 when it did not). A 2xx is delivered;
// anything else is an error.
func (s *Sender) Post(ctx context.Context, rawURL, key, requestID string, attempt int, body []byte) (int, error) {
	if err := s.Policy.CheckURL(rawURL); err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, rawURL, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "sless-callback/1")
	req.Header.Set("X-Request-Id", requestID)
	req.Header.Set("Sless-Callback-Attempt", strconv.Itoa(attempt))
	req.Header.Set(SignatureHeader, Sign(key, time.Now(), body))
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	// Read a little so the connection can be kept, not the whole of a
	// receiver that talks too much.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, fmt.Errorf("the receiver answered %s", resp.Status)
	}
	return resp.StatusCode, nil
}

// Retryable says whether another delivery may succeed after one that
// answered status or failed with err: a network error (but not a refusal
// by the policy, a certificate that does not verify or a name that does
// not exist), a 5xx, 408 or 429.
func Retryable(status int, err error) bool {
	if status == 0 && err != nil {
		return !IsRefused(err) && !retry.Pointless(err)
	}
	return status >= 500 || status == http.StatusRequestTimeout || status == http.StatusTooManyRequests
}
