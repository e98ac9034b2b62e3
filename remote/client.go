package remote

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Client is the leader's side of the protocol: it POSTs dispatches to executors over
// kept-alive connections, signed with the cluster secret, and checks their health.
// Create it with NewClient; it is safe for concurrent use.
type Client struct {
	http   *http.Client
	signer *Signer // nil: unsigned, for executors on loopback without a secret
	now    func() time.Time
}

// NewClient returns a client that signs with signer (nil: no cluster secret, requests
// go unsigned and only loopback executors take them) and gives every request timeout.
// now, when not nil, is the clock requests are signed by (the executors verify them
// against theirs, within the window): the scheduler passes its store-corrected clock,
// so that replicas whose hosts' clocks disagree still agree. Nil: time.Now.
func NewClient(signer *Signer, timeout time.Duration, now func() time.Time) *Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = MaxInFlight
	tr.MaxConnsPerHost = MaxInFlight // more would be answered busy: they wait here instead
	tr.Proxy = nil                   // executors are reached directly, never through an environment proxy
	if now == nil {
		now = time.Now
	}
	return &Client{http: &http.Client{Transport: tr, Timeout: timeout}, signer: signer, now: now}
}

// Close closes the client's idle connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// FencedError is a dispatch the executor refused because it has seen a higher token.
type FencedError struct {
	Token, Highest int64
}

func (e *FencedError) Error() string {
	return fmt.Sprintf("ax: remote: dispatch under token %d refused: the executor has seen token %d: %v", e.Token, e.Highest, ErrFenced)
}

// Unwrap makes errors.Is(err, ErrFenced) hold.
func (e *FencedError) Unwrap() error { return ErrFenced }

// Dispatch sends dr to the executor at base (its advertised URL). It returns the
// executor's answer; a *FencedError (ErrFenced) when the executor has seen a newer
// leader; an error wrapping ErrUnreachable when the executor could not be reached, did
// not answer within the timeout or answered what cannot be read (the tasks may or may
// not have been taken: the caller hands them back, and a duplicate delivery runs
// nothing); one wrapping ErrTooLarge when the executor refused the body as too large
// (MaxDispatchTasks tasks or DefaultMaxBodyBytes at most); one wrapping ErrBusy when
// it took none because it was busy with other requests; another error for any other
// refusal.
func (c *Client) Dispatch(ctx context.Context, base string, dr DispatchRequest) (*DispatchResponse, error) {
	resp, data, err := c.post(ctx, base, DispatchPath, dr.Token, dr)
	if err != nil {
		return nil, fmt.Errorf("ax: remote: dispatch to %s: %w", base, err)
	}
	switch resp.StatusCode {
	case http.StatusOK:
		var out DispatchResponse
		if err := json.Unmarshal(data, &out); err != nil { // it may have taken them: as if unanswered
			return nil, fmt.Errorf("ax: remote: dispatch to %s: malformed answer: %w: %w", base, ErrUnreachable, err)
		}
		return &out, nil
	case http.StatusConflict:
		var fb fencedBody
		if err := json.Unmarshal(data, &fb); err != nil {
			return nil, fmt.Errorf("ax: remote: dispatch to %s: malformed refusal: %w", base, err)
		}
		return nil, &FencedError{Token: dr.Token, Highest: fb.Highest}
	case http.StatusRequestEntityTooLarge:
		return nil, fmt.Errorf("ax: remote: dispatch to %s: %w (%s)", base, ErrTooLarge, resp.Status)
	case http.StatusServiceUnavailable:
		return nil, fmt.Errorf("ax: remote: dispatch to %s: %w (%s: %s)", base, ErrBusy, resp.Status, strings.TrimSpace(string(data)))
	default:
		return nil, fmt.Errorf("ax: remote: dispatch to %s: %s: %s", base, resp.Status, strings.TrimSpace(string(data)))
	}
}

// Released tells the replica at base that the leader under n.Token released its
// lease, so that it campaigns at once. Nil when the replica took the notice; an error
// wrapping ErrUnreachable when it could not be reached.
func (c *Client) Released(ctx context.Context, base string, n ReleasedNotice) error {
	resp, data, err := c.post(ctx, base, ReleasedPath, n.Token, n)
	if err != nil {
		return fmt.Errorf("ax: remote: release notice to %s: %w", base, err)
	}
	if resp.StatusCode != http.StatusNoContent && resp.StatusCode != http.StatusOK {
		return fmt.Errorf("ax: remote: release notice to %s: %s: %s", base, resp.Status, strings.TrimSpace(string(data)))
	}
	return nil
}

// post sends v as JSON to path at base under token, signed when there is a signer, and
// returns the answer with its body read (at most DefaultMaxBodyBytes). A request that
// got no complete answer is an error wrapping ErrUnreachable.
func (c *Client) post(ctx context.Context, base, path string, token int64, v any) (*http.Response, []byte, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return nil, nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(base, "/")+path, bytes.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if c.signer != nil {
		if err := c.signer.Sign(req, body, token, c.now()); err != nil {
			return nil, nil, err
		}
	} else {
		req.Header.Set(HeaderToken, strconv.FormatInt(token, 10))
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrUnreachable, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, DefaultMaxBodyBytes))
	if err != nil {
		return nil, nil, fmt.Errorf("read the answer: %w: %w", ErrUnreachable, err)
	}
	return resp, data, nil
}

// Health asks the executor at base whether it answers; nil when it does.
func (c *Client) Health(ctx context.Context, base string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(base, "/")+HealthPath, nil)
	if err != nil {
		return fmt.Errorf("ax: remote: health of %s: %w", base, err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("ax: remote: health of %s: %w: %w", base, ErrUnreachable, err)
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("ax: remote: health of %s: %w: %s", base, ErrUnreachable, resp.Status)
	}
	return nil
}
