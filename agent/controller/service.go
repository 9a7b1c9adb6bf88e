package controller

import (
	"cmp"
	"net"
	"reflect"
	"sort"
	"strconv"
	"time"

	"github.com/herd-dev/herd/api"
)

// ReconcileService computes a Service's endpoints: for every pod matching
// the selector (an empty selector matches none) that is Running and ready
// on a Ready node, and for every service port the pod declares (by port
// name, or by port number written as a string), an endpoint with the
// node's address and the pod's host port. Endpoints are sorted by service
// port, then pod. Status is written only when they change.
func ReconcileService(now time.Time, svc *api.Service, pods []*api.Pod, nodes []*api.Node) []Action {
	return reconcileService(now, svc, pods, nodeIndex(nodes))
}

func reconcileService(now time.Time, svc *api.Service, pods []*api.Pod, nodeByName map[string]*api.Node) []Action {
	if svc == nil {
		return nil
	}
	var eps []api.Endpoint
	for _, p := range pods {
		if p == nil || !api.MatchLabels(svc.Spec.Selector, p.Metadata.Labels) || !available(p, nodeByName) {
			continue
		}
		n := nodeByName[p.Spec.Node]
		if n == nil {
			continue
		}
		addr := n.Status.Address
		if addr == "" {
			addr = p.Status.IP
		}
		if addr == "" {
			continue
		}
		for _, sp := range svc.Spec.Ports {
			hp, ok := hostPortOf(p, sp.Target)
			if !ok {
				continue
			}
			name := sp.Name
			if name == "" {
				name = sp.Target
			}
			eps = append(eps, api.Endpoint{Port: name, Pod: p.Metadata.Name, Node: n.Metadata.Name,
				Address: net.JoinHostPort(addr, strconv.Itoa(hp))})
		}
	}
	sort.Slice(eps, func(i, j int) bool {
		a, b := &eps[i], &eps[j]
		return cmp.Or(cmp.Compare(a.Port, b.Port), cmp.Compare(a.Pod, b.Pod), cmp.Compare(a.Address, b.Address)) < 0
	})
	st := svc.Status
	st.Endpoints = eps
	if reflect.DeepEqual(st, svc.Status) || (len(eps) == 0 && len(svc.Status.Endpoints) == 0) {
		return nil
	}
	ns := *svc
	ns.Status = st
	return []Action{newAction(ActionUpdateStatus, &ns, "%d endpoints", len(eps))}
}

// hostPortOf finds the pod port a service port targets (by name, or by
// number) and returns its host port.
func hostPortOf(p *api.Pod, target string) (int, bool) {
	num, err := strconv.Atoi(target)
	for i, port := range p.Spec.Template.Ports {
		name := p.Spec.Template.PortName(i)
		if name != target && (err != nil || port.Port != num) {
			continue
		}
		if hp := p.Spec.HostPorts[name]; hp > 0 {
			return hp, true
		}
		if port.Port > 0 {
			return port.Port, true
		}
		return 0, false
	}
	return 0, false
}
