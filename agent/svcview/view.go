package svcview

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"slices"

	"github.com/herd-dev/herd/api"
)

// Path is where the leader writes the view on a worker board: a file
// only root reads (FileMode) in a folder of its own (DirMode), beside the
// API socket's folder, whose mode it leaves alone.
const Path = "/run/herd/view/services.json"

// FileMode and DirMode are the view file's permission and its folder's:
// root's only.
const (
	FileMode os.FileMode = 0o600
	DirMode  os.FileMode = 0o700
)

// MaxBytes bounds a view file a worker reads (a view of 100 services with
// 100 endpoints each is about 1.5 MB).
const MaxBytes = 8 << 20

// View is the service view: services with their ports and ready
// endpoints, boards with their phase and address.
type View struct {
	Services []*api.Service `json:"services"`
	Nodes    []*api.Node    `json:"nodes"`
}

// Build trims services and nodes to what the view holds and sorts them by
// name; nil entries are skipped. It never modifies its inputs.
func Build(services []*api.Service, nodes []*api.Node) View {
	v := View{Services: make([]*api.Service, 0, len(services)), Nodes: make([]*api.Node, 0, len(nodes))}
	for _, s := range services {
		if s == nil {
			continue
		}
		v.Services = append(v.Services, &api.Service{
			Kind:     api.KindService,
			Metadata: api.ObjectMeta{Name: s.Metadata.Name, Created: s.Metadata.Created},
			Spec:     api.ServiceSpec{Ports: slices.Clone(s.Spec.Ports)},
			Status:   api.ServiceStatus{Endpoints: slices.Clone(s.Status.Endpoints)},
		})
	}
	for _, n := range nodes {
		if n == nil {
			continue
		}
		v.Nodes = append(v.Nodes, &api.Node{
			Kind:     api.KindNode,
			Metadata: api.ObjectMeta{Name: n.Metadata.Name},
			Status:   api.NodeStatus{Phase: n.Status.Phase, Address: n.Status.Address, RaftAddress: n.Status.RaftAddress},
		})
	}
	slices.SortFunc(v.Services, func(a, b *api.Service) int { return cmp.Compare(a.Metadata.Name, b.Metadata.Name) })
	slices.SortFunc(v.Nodes, func(a, b *api.Node) int { return cmp.Compare(a.Metadata.Name, b.Metadata.Name) })
	return v
}

// Encode returns the view as JSON; equal views encode to equal bytes.
func (v View) Encode() []byte {
	b, err := json.Marshal(v)
	if err != nil {
		// Only plain structs, strings and numbers: cannot fail.
		panic(fmt.Sprintf("svcview: encode: %v", err))
	}
	return b
}

// Decode parses a view written by Encode, refusing one over MaxBytes and
// dropping nil entries.
func Decode(b []byte) (View, error) {
	if len(b) > MaxBytes {
		return View{}, fmt.Errorf("svcview: view is %d bytes, more than the %d allowed", len(b), MaxBytes)
	}
	var v View
	if err := json.Unmarshal(b, &v); err != nil {
		return View{}, fmt.Errorf("svcview: decode: %w", err)
	}
	v.Services = slices.DeleteFunc(v.Services, func(s *api.Service) bool { return s == nil })
	v.Nodes = slices.DeleteFunc(v.Nodes, func(n *api.Node) bool { return n == nil })
	return v, nil
}

// Workers returns the names of the Ready boards that hold no state (no
// Raft address): the boards the Publisher writes to.
func (v View) Workers() []string {
	var out []string
	for _, n := range v.Nodes {
		if n.Status.Phase == api.NodeReady && n.Status.RaftAddress == "" {
			out = append(out, n.Metadata.Name)
		}
	}
	return out
}
