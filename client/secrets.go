package client

import (
	"context"
	"net/http"

	"github.com/herd-dev/herd/api"
)

// PutSecret creates the secret req names (POST /v1/secrets) or, with
// overwrite, replaces every key of it (PUT /v1/secrets/{name}, creating
// nothing), and returns it as stored: sealed, never the values. The
// values travel in the request body only (over the API's tunnel or
// socket), never in a URL. Like every write it carries a request id.
func (c *Client) PutSecret(ctx context.Context, req api.SecretRequest, overwrite bool) (api.RawObject, error) {
	req.Kind = api.KindSecret
	var o api.RawObject
	method, p := http.MethodPost, kindPath(api.KindSecret, "")
	if overwrite {
		method, p = http.MethodPut, kindPath(api.KindSecret, req.Metadata.Name)
	}
	err := c.do(withRequestID(ctx), method, p, nil, req, &o)
	return o, err
}
