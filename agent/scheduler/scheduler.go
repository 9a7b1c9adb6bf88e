package scheduler

import (
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"

	"github.com/herd-dev/herd/api"
)

// Default dynamic host port range, for ports declared with port = 0.
const (
	DefaultPortMin = 20000
	DefaultPortMax = 29999
)

// Sentinel errors.
var (
	// ErrUnschedulable: no node fits the pod. The error value is an
	// *Unschedulable carrying the per-reason counts.
	ErrUnschedulable = errors.New("scheduler: no board fits")
	// ErrInvalidPod: the pod cannot be placed as written (nil, failing
	// api.ValidateBindable, or a resource quantity that does not parse). It is
	// not retried: the pod keeps Scheduled=False, reason InvalidPod.
	ErrInvalidPod = errors.New("scheduler: invalid pod")
	// ErrInvalidConfig: a Config failed Validate.
	ErrInvalidConfig = errors.New("scheduler: invalid config")
)

// Config tunes the scheduler.
type Config struct {
	// PortMin and PortMax bound the range (inclusive) that host ports for
	// port = 0 are picked from.
	PortMin, PortMax int
}

// DefaultConfig returns the default configuration: dynamic ports from
// 20000 to 29999.
func DefaultConfig() Config {
	return Config{PortMin: DefaultPortMin, PortMax: DefaultPortMax}
}

// Validate reports whether c is usable.
func (c Config) Validate() error {
	if c.PortMin < 1 || c.PortMax > 65535 || c.PortMin > c.PortMax {
		return fmt.Errorf("%w: dynamic port range %d-%d: want 1 <= min <= max <= 65535", ErrInvalidConfig, c.PortMin, c.PortMax)
	}
	return nil
}

// Snapshot is the scheduler's immutable input: every node and every pod of
// the cluster at one point in time. The scheduler never modifies it or the
// objects it points to.
type Snapshot struct {
	Nodes []*api.Node
	Pods  []*api.Pod
	// Services own their proxy ports on every board (api.ProxyOwners): no
	// pod gets one, fixed or picked.
	Services []*api.Service
}

// Decision is where a pod goes.
type Decision struct {
	// Node is the chosen node's name.
	Node string
	// HostPorts maps every port name of the pod's template to its host
	// port: the fixed port, or the one picked for port = 0. Nil when the
	// template declares no ports.
	HostPorts map[string]int
	// Reason says why this node won, for logs and `herdctl describe`.
	Reason string
}

// Placement is the outcome for one pod of PlaceAll: a Decision, or an error
// (an *Unschedulable, or one wrapping ErrInvalidPod).
type Placement struct {
	Pod      *api.Pod
	Decision Decision
	Err      error
}

// Scheduler places pods. It holds only its Config and is safe for
// concurrent use.
type Scheduler struct {
	cfg Config
}

// New returns a Scheduler with the given configuration.
func New(cfg Config) (*Scheduler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Scheduler{cfg: cfg}, nil
}

// Place picks a node for pod with the default configuration; see
// (*Scheduler).Place.
func Place(s *Snapshot, pod *api.Pod) (Decision, error) {
	return (&Scheduler{cfg: DefaultConfig()}).Place(s, pod)
}

// PlaceAll places pods in order with the default configuration; see
// (*Scheduler).PlaceAll.
func PlaceAll(s *Snapshot, pods []*api.Pod) []Placement {
	return (&Scheduler{cfg: DefaultConfig()}).PlaceAll(s, pods)
}

// Place picks a node for pod, which is expected to be Pending (its current
// spec.hostPorts are ignored). When pod.Spec.Node is set the pod is pinned:
// only that node is considered (daemon pods). When no node fits the error
// is an *Unschedulable (errors.Is(err, ErrUnschedulable)).
//
// Place indexes the whole snapshot on every call; to place many pods use
// PlaceAll, which indexes once.
func (sc *Scheduler) Place(s *Snapshot, pod *api.Pod) (Decision, error) {
	p := sc.PlaceAll(s, []*api.Pod{pod})[0]
	return p.Decision, p.Err
}

// PlaceAll places pods one after the other, in the order given, as if each
// decision had been applied before the next: two pods never get the same
// fixed or dynamic port on a node and never share the same memory. The
// result has one Placement per pod, in the same order.
func (sc *Scheduler) PlaceAll(s *Snapshot, pods []*api.Pod) []Placement {
	out := make([]Placement, len(pods))
	owners := make(map[api.OwnerRef]struct{})
	for _, p := range pods {
		if p != nil && p.Spec.Owner.Name != "" {
			owners[p.Spec.Owner] = struct{}{}
		}
	}
	st := newState(sc.cfg, s, owners)
	for i, p := range pods {
		out[i].Pod = p
		out[i].Decision, out[i].Err = st.place(p)
	}
	return out
}

// ---------------------------------------------------------------------------
// Working state.

const (
	protoTCP uint8 = iota
	protoUDP
)

type portKey struct {
	node  int32
	port  int32
	proto uint8
}

type ownerKey struct {
	owner api.OwnerRef
	node  int32
}

type nodeInfo struct {
	node    *api.Node
	memCap  int64
	memUsed int64
	cpuCap  int
	cpuUsed int
}

// state is the mutable working copy PlaceAll updates after each placement.
// It never writes to the snapshot.
type state struct {
	cfg    Config
	nodes  []nodeInfo
	byName map[string]int32
	ports  map[portKey]struct{}
	owners map[ownerKey]int
	// reserved are the services' proxy ports, held on every node: the
	// owning service by port.
	reserved map[portKey]string
	// scratch buffers reused while placing one pod: the probe start of
	// every dynamic port (offs) and the host ports picked on a node
	// (hostBuf).
	offs    []int
	hostBuf []int
}

func newState(cfg Config, s *Snapshot, owners map[api.OwnerRef]struct{}) *state {
	st := &state{cfg: cfg, owners: make(map[ownerKey]int), reserved: make(map[portKey]string)}
	if s == nil {
		st.ports = make(map[portKey]struct{})
		return st
	}
	st.ports = make(map[portKey]struct{}, len(s.Pods))
	for _, c := range api.ProxyOwners(s.Services) {
		st.reserved[reservedKey(c.Port, c.Protocol)] = c.Service
	}
	st.nodes = make([]nodeInfo, 0, len(s.Nodes))
	st.byName = make(map[string]int32, len(s.Nodes))
	for _, n := range s.Nodes {
		if n == nil {
			continue
		}
		if _, dup := st.byName[n.Metadata.Name]; dup {
			continue
		}
		st.byName[n.Metadata.Name] = int32(len(st.nodes))
		st.nodes = append(st.nodes, nodeInfo{node: n, memCap: n.Status.MemoryBytes, cpuCap: n.Status.CPUs * 100})
	}
	for _, p := range s.Pods {
		if p == nil || p.Spec.Node == "" || !p.Status.Phase.Occupies() {
			continue
		}
		ni, ok := st.byName[p.Spec.Node]
		if !ok {
			continue
		}
		// Admission validated the quantities; a bad one counts as zero
		// rather than blocking every placement.
		req, _ := p.Spec.Template.Resources.Request()
		st.take(ni, p, req, p.Spec.HostPorts)
		if _, ok := owners[p.Spec.Owner]; ok {
			st.owners[ownerKey{p.Spec.Owner, ni}]++
		}
	}
	return st
}

// take books the resources of pod p on node ni.
func (st *state) take(ni int32, p *api.Pod, req api.Request, hostPorts map[string]int) {
	n := &st.nodes[ni]
	n.memUsed += req.MemoryOn(n.memCap)
	n.cpuUsed += req.CPUPercent
	for i := range p.Spec.Template.Ports {
		port := &p.Spec.Template.Ports[i]
		hp, ok := hostPorts[p.Spec.Template.PortName(i)]
		if !ok || hp == 0 {
			hp = port.Port
		}
		if hp > 0 {
			st.ports[portKey{ni, int32(hp), protoOf(port)}] = struct{}{}
		}
	}
}

// reservedKey is the key of a service's proxy port in state.reserved (node
// -1: every node).
func reservedKey(port int, protocol string) portKey {
	k := portKey{-1, int32(port), protoTCP}
	if protocol == "udp" {
		k.proto = protoUDP
	}
	return k
}

func protoName(p *api.Port) string {
	if protoOf(p) == protoUDP {
		return "udp"
	}
	return "tcp"
}

func protoOf(p *api.Port) uint8 {
	if p.Protocol == "udp" {
		return protoUDP
	}
	return protoTCP
}

func (st *state) place(pod *api.Pod) (Decision, error) {
	if pod == nil {
		return Decision{}, fmt.Errorf("%w: nil pod", ErrInvalidPod)
	}
	// Admission is the one gate, but a pod stored before a rule existed
	// (or written around the API) may break one: binding it would only
	// leave it unrenderable on its board, or fail the bind transaction.
	if err := api.ValidateBindable(pod); err != nil {
		return Decision{}, fmt.Errorf("%w: %w", ErrInvalidPod, err)
	}
	req, err := pod.Spec.Template.Resources.Request()
	if err != nil {
		return Decision{}, fmt.Errorf("%w: pods/%s: spec.template.%w", ErrInvalidPod, pod.Metadata.Name, err)
	}
	tmpl := &pod.Spec.Template
	st.setOffsets(pod)

	reasons := make(map[string]int)
	best, considered := int32(-1), 0
	var bestSpread int
	var bestFree float64
	consider := func(ni int32) {
		considered++
		if r := st.filter(ni, pod, req); r != "" {
			reasons[r]++
			return
		}
		spread := st.owners[ownerKey{pod.Spec.Owner, ni}]
		if pod.Spec.Owner.Name == "" {
			spread = 0
		}
		n := &st.nodes[ni]
		free := 0.0
		if n.memCap > 0 {
			free = float64(n.memCap-n.memUsed-req.MemoryOn(n.memCap)) / float64(n.memCap)
		}
		if best < 0 || spread < bestSpread ||
			(spread == bestSpread && (free > bestFree ||
				(free == bestFree && n.node.Metadata.Name < st.nodes[best].node.Metadata.Name))) {
			best, bestSpread, bestFree = ni, spread, free
		}
	}
	if pod.Spec.Node != "" {
		ni, ok := st.byName[pod.Spec.Node]
		if !ok {
			return Decision{}, &Unschedulable{Pod: pod.Metadata.Name, Boards: 1,
				Reasons: []ReasonCount{{Reason: "unknown board " + strconv.Quote(pod.Spec.Node), Boards: 1}}}
		}
		consider(ni)
	} else {
		for ni := range st.nodes {
			consider(int32(ni))
		}
	}
	if best < 0 {
		return Decision{}, newUnschedulable(pod.Metadata.Name, considered, reasons)
	}

	hosts, _ := st.pickPorts(best, pod)
	var hostPorts map[string]int
	if len(tmpl.Ports) > 0 {
		hostPorts = make(map[string]int, len(tmpl.Ports))
		for i := range tmpl.Ports {
			hostPorts[tmpl.PortName(i)] = hosts[i]
		}
	}
	st.take(best, pod, req, hostPorts)
	if pod.Spec.Owner.Name != "" {
		st.owners[ownerKey{pod.Spec.Owner, best}]++
	}
	d := Decision{
		Node:      st.nodes[best].node.Metadata.Name,
		HostPorts: hostPorts,
		Reason:    fmt.Sprintf("%d of its owner's pods already there, %.0f%% memory left after placement", bestSpread, bestFree*100),
	}
	return d, nil
}

// filter returns why node ni cannot take pod, or "" if it can.
func (st *state) filter(ni int32, pod *api.Pod, req api.Request) string {
	n := &st.nodes[ni]
	if n.node.Status.Phase != api.NodeReady {
		return "not ready"
	}
	if n.node.Spec.Unschedulable {
		return "cordoned"
	}
	if !n.node.MatchesNodeSelector(pod.Spec.Template.NodeSelector) {
		return "node selector mismatch"
	}
	if r := n.node.Status.MissingDevice(pod.Spec.Template.Devices); r != "" {
		return r
	}
	if r := n.node.Status.UnenforcedLimit(pod.Spec.Template.Resources); r != "" {
		return r
	}
	for i := range pod.Spec.Template.Ports {
		p := &pod.Spec.Template.Ports[i]
		if p.Port <= 0 {
			continue
		}
		if svc, ok := st.reserved[reservedKey(p.Port, p.Protocol)]; ok {
			return fmt.Sprintf("port %s is service %s's port on every board", api.ProxyPort{Port: p.Port, Protocol: protoName(p)}, svc)
		}
		if _, used := st.ports[portKey{ni, int32(p.Port), protoOf(p)}]; used {
			if protoOf(p) == protoUDP {
				return "port " + strconv.Itoa(p.Port) + "/udp in use"
			}
			return "port " + strconv.Itoa(p.Port) + " in use"
		}
	}
	if m := req.MemoryOn(n.memCap); m > 0 && n.memUsed+m > n.memCap {
		return "insufficient memory"
	}
	if req.CPUPercent > 0 && n.cpuUsed+req.CPUPercent > n.cpuCap {
		return "insufficient cpu"
	}
	if _, ok := st.pickPorts(ni, pod); !ok {
		return fmt.Sprintf("no free port in %d-%d", st.cfg.PortMin, st.cfg.PortMax)
	}
	return ""
}

// pickPorts returns the host port of every template port on node ni (into a
// scratch buffer valid until the next call): the fixed port, or for port 0
// the first free port of the dynamic range probing upwards from a start
// derived from the pod and port names, so the choice is deterministic but
// successive pods of one owner do not all probe from the same place. A
// dynamic port avoids every port in use on the node with the same protocol
// and the pod's own other ports.
func (st *state) pickPorts(ni int32, pod *api.Pod) ([]int, bool) {
	ports := pod.Spec.Template.Ports
	st.hostBuf = st.hostBuf[:0]
	size := st.cfg.PortMax - st.cfg.PortMin + 1
	for i := range ports {
		p := &ports[i]
		if p.Port > 0 {
			st.hostBuf = append(st.hostBuf, p.Port)
			continue
		}
		proto := protoOf(p)
		off := st.offs[i]
		found := 0
		for k := 0; k < size; k++ {
			cand := st.cfg.PortMin + (off+k)%size
			if _, used := st.ports[portKey{ni, int32(cand), proto}]; used {
				continue
			}
			if _, svc := st.reserved[portKey{-1, int32(cand), proto}]; svc {
				continue
			}
			if ownPortUsed(ports, st.hostBuf, cand, proto, i) {
				continue
			}
			found = cand
			break
		}
		if found == 0 {
			return nil, false
		}
		st.hostBuf = append(st.hostBuf, found)
	}
	return st.hostBuf, true
}

// setOffsets computes, for every dynamic port of pod, where in the dynamic
// range pickPorts starts probing: a hash of the pod and port names.
func (st *state) setOffsets(pod *api.Pod) {
	st.offs = st.offs[:0]
	size := uint32(st.cfg.PortMax - st.cfg.PortMin + 1)
	for i := range pod.Spec.Template.Ports {
		h := fnv.New32a()
		h.Write([]byte(pod.Metadata.Name))
		h.Write([]byte{0})
		h.Write([]byte(pod.Spec.Template.PortName(i)))
		st.offs = append(st.offs, int(h.Sum32()%size))
	}
}

// ownPortUsed reports whether port cand/proto is already taken by another
// port of the same pod: a fixed port anywhere in the template, or a dynamic
// one picked earlier (hosts holds the picks for ports[:i]).
func ownPortUsed(ports []api.Port, hosts []int, cand int, proto uint8, i int) bool {
	for j := range ports {
		if j == i || protoOf(&ports[j]) != proto {
			continue
		}
		if ports[j].Port == cand || (j < i && hosts[j] == cand) {
			return true
		}
	}
	return false
}
