// Package client is the Go client of the herd agent's HTTP API, used by
// herdctl and by tests. STUB: signatures fixed, bodies being written.
package client

import (
	"context"
	"errors"
	"net/http"

	"github.com/herd-dev/herd/api"
)

// DefaultAddr is the agent API address herdctl uses when nothing else is set.
const DefaultAddr = "http://127.0.0.1:7948"

var errTODO = errors.New("client: not implemented yet")

// APIError is an error response from the agent.
type APIError struct {
	StatusCode int              `json:"-"`
	Code       string           `json:"code"` // "invalid", "not_found", "conflict", "no_leader", ...
	Message    string           `json:"message"`
	Fields     []api.FieldError `json:"fields,omitempty"`
}

func (e *APIError) Error() string { return e.Message }

// Options configure a Client.
type Options struct {
	// Token is sent as "Authorization: Bearer" when set.
	Token string
	// HTTPClient overrides the transport (SSH tunnels, tests).
	HTTPClient *http.Client
}

// Client talks to one of several agent addresses, moving on to the next
// when one cannot be reached. Addresses are http://host:port, https://...,
// or unix:///path/to/socket.
type Client struct {
	addrs []string
	opts  Options
}

// New returns a client for addrs.
func New(addrs []string, opts Options) (*Client, error) {
	return &Client{addrs: addrs, opts: opts}, nil
}

// ApplyResult says what apply did to one object.
type ApplyResult struct {
	Kind   api.Kind      `json:"kind"`
	Name   string        `json:"name"`
	Action string        `json:"action"` // "created", "configured", "unchanged"
	Object api.RawObject `json:"object"`
}

// Status is the agent's view of the cluster.
type Status struct {
	Node    string   `json:"node"`
	Leader  string   `json:"leader"`
	Servers []Server `json:"servers"`
	Members []Member `json:"members"`
	Version string   `json:"version"`
}

// Server is a Raft server.
type Server struct {
	ID       string `json:"id"`
	Address  string `json:"address"`
	Suffrage string `json:"suffrage"` // "voter" or "nonvoter"
	Leader   bool   `json:"leader"`
}

// Member is a gossip member.
type Member struct {
	Name   string `json:"name"`
	Addr   string `json:"addr"`
	State  string `json:"state"` // alive, suspect, dead, left
	Server bool   `json:"server"`
}

// List lists objects of a kind, sorted by name, and the store's
// resourceVersion at the time of listing (to watch from).
func (c *Client) List(ctx context.Context, kind api.Kind) ([]api.RawObject, uint64, error) {
	return nil, 0, errTODO
}

// Get gets one object.
func (c *Client) Get(ctx context.Context, kind api.Kind, name string) (api.RawObject, error) {
	return api.RawObject{}, errTODO
}

// Apply creates or updates objs together: all or none.
func (c *Client) Apply(ctx context.Context, objs []api.Object, dryRun bool) ([]ApplyResult, error) {
	return nil, errTODO
}

// Delete deletes one object.
func (c *Client) Delete(ctx context.Context, kind api.Kind, name string) error { return errTODO }

// Scale sets a deployment's replicas.
func (c *Client) Scale(ctx context.Context, name string, replicas int) (api.RawObject, error) {
	return api.RawObject{}, errTODO
}

// Watch streams events for kind ("" for all) after fromRV until ctx ends.
func (c *Client) Watch(ctx context.Context, kind api.Kind, fromRV uint64) (<-chan api.WatchEvent, error) {
	return nil, errTODO
}

// Status returns the agent's cluster status.
func (c *Client) Status(ctx context.Context) (Status, error) { return Status{}, errTODO }
