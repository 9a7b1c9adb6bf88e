package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// ForwardGet sends a GET of path (escaped, under /v1/ or /ui/) with the
// raw query to the agent, as herdctl dashboard's proxy does for the
// browser: with the client's token and retries, nothing of the caller's
// request but its path and query. With stream there is no request timeout
// (watch streams); otherwise the client's timeout applies. A non-2xx
// answer is an *api.APIError, as for every call. The caller closes the
// body, then calls cancel.
func (c *Client) ForwardGet(ctx context.Context, path, rawQuery string, stream bool) (*http.Response, context.CancelFunc, error) {
	if !strings.HasPrefix(path, "/v1/") && !strings.HasPrefix(path, "/ui/") {
		return nil, nil, fmt.Errorf("client: forward %q: only /v1/ and /ui/ paths", path)
	}
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return nil, nil, fmt.Errorf("client: forward %s: query %q: %w", path, rawQuery, err)
	}
	return c.send(ctx, http.MethodGet, path, q, nil, !stream)
}
