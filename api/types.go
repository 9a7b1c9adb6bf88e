package api

import (
	"encoding/json"
	"slices"
	"time"
)

// Kind names an object kind. Kinds are lower-case plurals, as they appear in
// API paths and in herdctl commands.
type Kind string

// ObjectRef is how herd names an object in errors, events and logs: its
// kind, '/', its name ("deployments/web"; "deployments/(unnamed)" for an
// object without one).
func ObjectRef(k Kind, name string) string {
	if name == "" {
		name = "(unnamed)"
	}
	return string(k) + "/" + name
}

// The object kinds.
const (
	KindNode       Kind = "nodes"
	KindDeployment Kind = "deployments"
	KindDaemon     Kind = "daemons"
	KindPod        Kind = "pods"
	KindService    Kind = "services"
	KindSecret     Kind = "secrets"
)

// Kinds lists every kind in a fixed order.
var Kinds = []Kind{KindNode, KindDeployment, KindDaemon, KindPod, KindService, KindSecret, KindJob}

// ObjectMeta is the metadata every object carries.
type ObjectMeta struct {
	// Name is DNS-label-like: [a-z0-9-], at most 63 characters, starting and
	// ending with a letter or digit.
	Name string `json:"name" toml:"name"`
	// Labels are user key/value pairs used by selectors.
	Labels map[string]string `json:"labels,omitempty" toml:"labels,omitempty"`
	// Generation moves only when the spec changes. Set by the store.
	Generation int64 `json:"generation,omitempty" toml:"-"`
	// ResourceVersion is the Raft index of the last write to this object.
	// Writes carrying a non-zero ResourceVersion are compare-and-swap.
	ResourceVersion uint64 `json:"resourceVersion,omitempty" toml:"-"`
	// Created is when the object was first stored (leader's clock).
	Created time.Time `json:"created,omitzero" toml:"-"`
}

// Condition is one observed aspect of an object's state.
type Condition struct {
	Type               string          `json:"type"`
	Status             ConditionStatus `json:"status"`
	Reason             string          `json:"reason,omitempty"`
	Message            string          `json:"message,omitempty"`
	LastTransitionTime time.Time       `json:"lastTransitionTime,omitzero"`
}

// FindCondition returns the condition of type typ in conds, or nil.
func FindCondition(conds []Condition, typ string) *Condition {
	for i := range conds {
		if conds[i].Type == typ {
			return &conds[i]
		}
	}
	return nil
}

// SetCondition returns conds with c in place of the condition of its type
// (appended when there is none), and whether that changed anything: a
// condition with the same status, reason and message stays as it was, and
// conds is returned as it is. Its LastTransitionTime is the old
// condition's while the status stays the same, else now. conds is not
// modified.
func SetCondition(conds []Condition, c Condition, now time.Time) ([]Condition, bool) {
	i := slices.IndexFunc(conds, func(o Condition) bool { return o.Type == c.Type })
	if i < 0 {
		c.LastTransitionTime = now
		return append(slices.Clone(conds), c), true
	}
	old := conds[i]
	if old.Status == c.Status && old.Reason == c.Reason && old.Message == c.Message {
		return conds, false
	}
	c.LastTransitionTime = now
	if old.Status == c.Status {
		c.LastTransitionTime = old.LastTransitionTime
	}
	out := slices.Clone(conds)
	out[i] = c
	return out, true
}

// RemoveCondition returns conds without the condition of type typ (nil
// when none remain), and whether there was one. conds is not modified.
func RemoveCondition(conds []Condition, typ string) ([]Condition, bool) {
	i := slices.IndexFunc(conds, func(o Condition) bool { return o.Type == typ })
	if i < 0 {
		return conds, false
	}
	out := slices.Delete(slices.Clone(conds), i, i+1)
	if len(out) == 0 {
		out = nil
	}
	return out, true
}

// ConditionStatus is True, False or Unknown.
type ConditionStatus string

// Condition statuses.
const (
	ConditionTrue    ConditionStatus = "True"
	ConditionFalse   ConditionStatus = "False"
	ConditionUnknown ConditionStatus = "Unknown"
)

// Condition types used across kinds.
const (
	ConditionAvailable      = "Available"
	ConditionProgressing    = "Progressing"
	ConditionReplicaFailure = "ReplicaFailure"
	ConditionScheduled      = "Scheduled"
	ConditionReady          = "Ready"
)

// Object is implemented by every kind's struct.
type Object interface {
	// GetKind returns the object's kind.
	GetKind() Kind
	// GetMeta returns a pointer to the object's metadata.
	GetMeta() *ObjectMeta
}

// ---------------------------------------------------------------------------
// Pod template: what a workload is.

// PodTemplate describes the process a pod runs on a board. It is copied into
// every Pod that a Deployment or Daemon creates.
type PodTemplate struct {
	// Labels are copied onto pods; selectors match them.
	Labels map[string]string `json:"labels,omitempty" toml:"labels,omitempty"`
	// Exec is the argv of the process. Exec[0] is an absolute path or a
	// command name resolved by systemd. Never passed through a shell.
	Exec []string `json:"exec" toml:"exec"`
	// Env is the process environment. Keys match [A-Za-z_][A-Za-z0-9_]*.
	Env map[string]string `json:"env,omitempty" toml:"env,omitempty"`
	// WorkingDir is an absolute path on the board.
	WorkingDir string `json:"workingDir,omitempty" toml:"working_dir,omitempty"`
	// User runs the process; empty means root. Also [a-z_][a-z0-9_-]*.
	User string `json:"user,omitempty" toml:"user,omitempty"`
	// Files are placed on the board before the process starts.
	Files []File `json:"files,omitempty" toml:"files,omitempty"`
	// Artifacts are files the board's own agent downloads, checks against
	// their SHA-256 and places before the process starts (binaries too big
	// for Files), at most MaxArtifacts. See Artifact.
	Artifacts []Artifact `json:"artifacts,omitempty" toml:"artifacts,omitempty"`
	// Ports the process listens on, on the board's address.
	Ports []Port `json:"ports,omitempty" toml:"ports,omitempty"`
	// Resources are limits enforced by systemd and requests the scheduler
	// reserves.
	Resources Resources `json:"resources,omitzero" toml:"resources,omitempty"`
	// RestartPolicy is always, on-failure or never. Default always.
	RestartPolicy RestartPolicy `json:"restartPolicy,omitempty" toml:"restart,omitempty"`
	// Readiness, when set, must pass before the pod counts as ready.
	Readiness *Probe `json:"readiness,omitempty" toml:"readiness,omitempty"`
	// OnDisconnect is what the board does with the unit while it cannot
	// reach the servers: nil keeps it running (the default, "keep"); a
	// StopAfter has the board's own agent stop it after that long.
	OnDisconnect *OnDisconnect `json:"onDisconnect,omitempty" toml:"on_disconnect,omitempty"`
	// NodeSelector restricts placement to nodes whose labels match. The
	// well-known labels herd.dev/arch, herd.dev/model and herd.dev/node are
	// set from gossip facts; "arch" and "model" are accepted as shorthands.
	NodeSelector map[string]string `json:"nodeSelector,omitempty" toml:"node_selector,omitempty"`
	// Sandbox is how tightly systemd confines the process: "default"
	// (SandboxDefault, what SetDefaults fills in: NoNewPrivileges,
	// PrivateTmp, ProtectSystem=full and similar options ordinary servers
	// tolerate) or "none" (SandboxNone).
	Sandbox string `json:"sandbox,omitempty" toml:"sandbox,omitempty"`
	// Devices are device nodes the process may open ("/dev/i2c-1"), at
	// most MaxDevices, each of a DeviceClass. The pod is placed only on a
	// board that advertises them all, and its unit may open these and
	// no other device node (DevicePolicy=closed, DeviceAllow=). The
	// process's user still needs the node's file permissions.
	Devices []string `json:"devices,omitempty" toml:"devices,omitempty"`
	// Secrets name the secrets (KindSecret) the process gets as systemd
	// credentials, at most MaxTemplateSecrets: every key of each, as
	// $CREDENTIALS_DIRECTORY/<secret>_<key> (CredentialID), readable by
	// the pod's user only. A pod whose secret does not exist stays
	// Pending; a changed secret is a new revision (PodRevision).
	Secrets []string `json:"secrets,omitempty" toml:"secrets,omitempty"`
}

// File is a file placed on the board for a pod.
type File struct {
	// Path is absolute, without "..".
	Path string `json:"path" toml:"path"`
	// Content is written exactly.
	Content string `json:"content" toml:"content"`
	// Mode is an octal permission string such as "0644". Default "0644".
	// The setuid and setgid bits (04000, 02000) need AllowSetID.
	Mode string `json:"mode,omitempty" toml:"mode,omitempty"`
	// AllowSetID permits a Mode with the setuid or setgid bit.
	AllowSetID bool `json:"allowSetID,omitempty" toml:"allow_setid,omitempty"`
}

// Port is a port a pod listens on.
type Port struct {
	// Name is a DNS label; services refer to it. Default "p<index>" .
	Name string `json:"name,omitempty" toml:"name,omitempty"`
	// Port is the fixed host port, or 0 to let herd pick one and pass it in
	// $PORT (first port) and $PORT_<NAME> (every port).
	Port int `json:"port" toml:"port"`
	// Protocol is tcp or udp. Default tcp.
	Protocol string `json:"protocol,omitempty" toml:"protocol,omitempty"`
}

// Resources holds limits and requests.
type Resources struct {
	// MemoryLimit is systemd MemoryMax= syntax: bytes with K/M/G/T suffix
	// (base 1024) or a percentage of the board's memory.
	MemoryLimit string `json:"memoryLimit,omitempty" toml:"memory_limit,omitempty"`
	// CPULimit is systemd CPUQuota= syntax: "50%" is half a core.
	CPULimit string `json:"cpuLimit,omitempty" toml:"cpu_limit,omitempty"`
	// MemoryRequest is reserved by the scheduler; defaults to MemoryLimit
	// when that is absolute.
	MemoryRequest string `json:"memoryRequest,omitempty" toml:"memory_request,omitempty"`
	// CPURequest is reserved by the scheduler ("25%" of a core); defaults to
	// CPULimit.
	CPURequest string `json:"cpuRequest,omitempty" toml:"cpu_request,omitempty"`
	// AllowUnenforcedLimits lets the scheduler place the pod on a board
	// that cannot enforce its MemoryLimit or CPULimit (the cgroup
	// controller is off, see NodeStatus.UnenforcedLimit): the limit is
	// then written to the unit but does nothing. It needs a limit to be
	// set.
	AllowUnenforcedLimits bool `json:"allowUnenforcedLimits,omitempty" toml:"allow_unenforced_limits,omitempty"`
}

// RestartPolicy says when systemd restarts a pod's process.
type RestartPolicy string

// Restart policies.
const (
	RestartAlways    RestartPolicy = "always"
	RestartOnFailure RestartPolicy = "on-failure"
	RestartNever     RestartPolicy = "never"
)

// Probe is a readiness check. Exactly one of TCP, HTTP or Exec is set.
type Probe struct {
	// TCP is a port name or number to connect to on the board.
	TCP string `json:"tcp,omitempty" toml:"tcp,omitempty"`
	// HTTP is a URL path on the first port ("/healthz"); 2xx/3xx passes.
	HTTP string `json:"http,omitempty" toml:"http,omitempty"`
	// HTTPPort is the port name or number for HTTP; default the first port.
	HTTPPort string `json:"httpPort,omitempty" toml:"http_port,omitempty"`
	// Exec is an argv run on the board; exit 0 passes.
	Exec []string `json:"exec,omitempty" toml:"exec,omitempty"`
	// PeriodSeconds between checks. Default 5.
	PeriodSeconds int `json:"periodSeconds,omitempty" toml:"period_seconds,omitempty"`
	// TimeoutSeconds per check. Default 2.
	TimeoutSeconds int `json:"timeoutSeconds,omitempty" toml:"timeout_seconds,omitempty"`
	// FailureThreshold is how many checks in a row must fail before a
	// ready pod counts as not ready; 0 means
	// DefaultProbeFailureThreshold (see Failures). A pod not yet ready
	// becomes ready at its first passing check.
	FailureThreshold int `json:"failureThreshold,omitempty" toml:"failure_threshold,omitempty"`
}

// Failures is how many checks in a row must fail before a ready pod counts
// as not ready: FailureThreshold, or DefaultProbeFailureThreshold when it
// is 0. The default is applied here, not stored: templates stored before
// the field existed keep their hash, so an upgrade rolls no pod.
func (p *Probe) Failures() int {
	if p.FailureThreshold > 0 {
		return p.FailureThreshold
	}
	return DefaultProbeFailureThreshold
}

// ---------------------------------------------------------------------------
// Node

// Node is a board, known from gossip.
type Node struct {
	Kind     Kind       `json:"kind"`
	Metadata ObjectMeta `json:"metadata"`
	Spec     NodeSpec   `json:"spec"`
	Status   NodeStatus `json:"status,omitzero"`
}

// NodeSpec is what a user may set on a node.
type NodeSpec struct {
	// Unschedulable is the cordoned flag: no new pods are placed here.
	Unschedulable bool `json:"unschedulable,omitempty"`
	// Drain, when set, asks herd to move the board's pods off
	// (herdctl drain; see NodeDrain). Needs Unschedulable.
	Drain *NodeDrain `json:"drain,omitempty"`
}

// NodePhase is Ready, NotReady or Left.
type NodePhase string

// Node phases.
const (
	NodeReady    NodePhase = "Ready"
	NodeNotReady NodePhase = "NotReady"
	NodeLeft     NodePhase = "Left"
)

// BoardFacts are what a board's agent finds out about the board itself
// (agent.FactsFrom) and announces in gossip: the one shape they have from
// the agent through gossip.Meta and the node controller to NodeStatus,
// whose JSON carries its fields inline. Empty fields are unknown: agents
// that predate a fact send none.
type BoardFacts struct {
	// Arch is GOARCH-style (amd64, arm64, arm).
	Arch string `json:"arch,omitempty"`
	// ArchVariant tells ARM boards apart: arm64, armv7 or armv6 (a 32-bit
	// userland on a 64-bit kernel is armv7); GOARCH for other boards.
	// Empty from agents that predate board facts, as are the fields below
	// down to CgroupControllers.
	ArchVariant string `json:"archVariant,omitempty"`
	// KernelArch is the kernel's machine (uname -m): aarch64, armv7l,
	// armv6l, x86_64.
	KernelArch string `json:"kernelArch,omitempty"`
	// Kernel is the kernel release (uname -r).
	Kernel string `json:"kernel,omitempty"`
	// Systemd is the board's systemd version ("252.30").
	Systemd string `json:"systemd,omitempty"`
	// Cgroup is the cgroup layout: v2, hybrid, v1 or none; empty when the
	// agent did not say (see UnenforcedLimit).
	Cgroup string `json:"cgroup,omitempty"`
	// CgroupControllers are the resource controllers available to the
	// board's systemd, among cpu, cpuset, io, memory and pids.
	CgroupControllers []string `json:"cgroupControllers,omitempty"`
	// Model is the board model (e.g. "Raspberry Pi 4 Model B").
	Model string `json:"model,omitempty"`
	// MemoryBytes is the board's total memory.
	MemoryBytes int64 `json:"memoryBytes,omitempty"`
	// CPUs is the number of CPUs.
	CPUs int `json:"cpus,omitempty"`
	// Devices are the board's device nodes of the DeviceClasses, by name
	// under /dev ("gpiochip0", "i2c-1", "ttyUSB0"), in SortDevices order.
	// A board with more than fit in gossip advertises the first ones.
	Devices []string `json:"devices,omitempty"`
}

// Clone returns a copy of f that shares no memory with it.
func (f BoardFacts) Clone() BoardFacts {
	f.CgroupControllers = slices.Clone(f.CgroupControllers)
	f.Devices = slices.Clone(f.Devices)
	return f
}

// NodeStatus is what gossip and the node controller observed.
type NodeStatus struct {
	Phase NodePhase `json:"phase,omitempty"`
	// Since is when Phase last changed.
	Since time.Time `json:"since,omitzero"`
	// Fenced is true once stale units on a returning board were stopped.
	Fenced bool `json:"fenced,omitempty"`
	// Address is the board's IP address (from the gossip advertise address).
	Address string `json:"address,omitempty"`
	// RaftAddress is host:port of the raft transport, empty for non-servers.
	RaftAddress string `json:"raftAddress,omitempty"`
	// SSHAddress is host:port of the board's sshd.
	SSHAddress string `json:"sshAddress,omitempty"`
	// HostKey is the board's SSH host public key in authorized_keys format.
	HostKey string `json:"hostKey,omitempty"`
	// BoardFacts are what the board's agent found out about the board
	// and announced in gossip.
	BoardFacts
	// Version is the agent version.
	Version string `json:"version,omitempty"`
	// Server is true when the agent takes part in Raft.
	Server     bool        `json:"server,omitempty"`
	Conditions []Condition `json:"conditions,omitempty"`
}

// GetKind implements Object.
func (*Node) GetKind() Kind { return KindNode }

// GetMeta implements Object.
func (n *Node) GetMeta() *ObjectMeta { return &n.Metadata }

// ---------------------------------------------------------------------------
// Deployment

// Deployment keeps a number of identical pods running.
type Deployment struct {
	Kind     Kind             `json:"kind"`
	Metadata ObjectMeta       `json:"metadata"`
	Spec     DeploymentSpec   `json:"spec"`
	Status   DeploymentStatus `json:"status,omitzero"`
}

// DeploymentSpec is the desired state of a Deployment.
type DeploymentSpec struct {
	// Replicas is the number of pods. nil in a manifest means "not owned by
	// the manifest": apply keeps what is stored (1 on create) and
	// `herdctl scale` owns it.
	Replicas *int `json:"replicas,omitempty"`
	// Selector matches the pods this deployment owns; defaults to the
	// template labels.
	Selector map[string]string `json:"selector,omitempty"`
	Template PodTemplate       `json:"template"`
	Strategy RolloutStrategy   `json:"strategy,omitzero"`
	// Rebalance, when set, asks for the pods to be spread evenly again
	// (herdctl rebalance; see RebalanceRequest).
	Rebalance *RebalanceRequest `json:"rebalance,omitempty"`
}

// RolloutStrategy limits a rolling update.
type RolloutStrategy struct {
	// MaxSurge is how many pods above Replicas may exist during a rollout.
	// Default 1.
	MaxSurge *int `json:"maxSurge,omitempty"`
	// MaxUnavailable is how many pods below Replicas may be unavailable.
	// Default 0.
	MaxUnavailable *int `json:"maxUnavailable,omitempty"`
}

// DeploymentStatus is the observed state of a Deployment.
type DeploymentStatus struct {
	ObservedGeneration int64       `json:"observedGeneration,omitempty"`
	Revision           string      `json:"revision,omitempty"`
	Replicas           int         `json:"replicas"`
	UpdatedReplicas    int         `json:"updatedReplicas"`
	ReadyReplicas      int         `json:"readyReplicas"`
	AvailableReplicas  int         `json:"availableReplicas"`
	Conditions         []Condition `json:"conditions,omitempty"`
	// PodsCreated counts the pods herd has ever created for this
	// deployment; the next pod's name comes from it. It only grows, and
	// moves in the same Raft transaction as the creates it counts, that
	// transaction compare-and-swap on the deployment's resourceVersion: a
	// crash, a retried write or a new leader never hands out a name twice.
	// Pod k (from 0) is named <deployment>-<suffix>, the 5-character suffix
	// a one-to-one function of k modulo 26^5 keyed by the deployment's name
	// and metadata.created (agent/controller), so names come back only
	// after 26^5 = 11,881,376 creations, and even then a name still in
	// use is skipped. A deployment deleted and created again starts at 0
	// with a different key. Written by herd only, like all status.
	PodsCreated int64 `json:"podsCreated,omitempty"`
	// History is the rollout history, newest first (see RecordRevision).
	// Empty from agents that predate it.
	History []TemplateRevision `json:"history,omitempty"`
	// Rebalance is the progress on spec.rebalance.
	Rebalance *RebalanceStatus `json:"rebalance,omitempty"`
}

// GetKind implements Object.
func (*Deployment) GetKind() Kind { return KindDeployment }

// GetMeta implements Object.
func (d *Deployment) GetMeta() *ObjectMeta { return &d.Metadata }

// ---------------------------------------------------------------------------
// Daemon

// Daemon runs one pod on every matching node.
type Daemon struct {
	Kind     Kind         `json:"kind"`
	Metadata ObjectMeta   `json:"metadata"`
	Spec     DaemonSpec   `json:"spec"`
	Status   DaemonStatus `json:"status,omitzero"`
}

// DaemonSpec is the desired state of a Daemon. Template.NodeSelector picks
// the nodes.
type DaemonSpec struct {
	Template PodTemplate `json:"template"`
	// Strategy limits a rolling update; empty means one board at a time.
	Strategy DaemonStrategy `json:"strategy,omitzero"`
}

// DaemonStrategy limits a daemon's rolling update.
type DaemonStrategy struct {
	// MaxUnavailable is how many boards may have no available pod of the
	// daemon while its pods are replaced. nil means
	// DefaultDaemonMaxUnavailable (1); it is not filled in by SetDefaults,
	// so a daemon stored before the field existed keeps its spec.
	MaxUnavailable *int `json:"maxUnavailable,omitempty"`
}

// DaemonStatus is the observed state of a Daemon.
type DaemonStatus struct {
	ObservedGeneration int64       `json:"observedGeneration,omitempty"`
	Revision           string      `json:"revision,omitempty"`
	Desired            int         `json:"desired"`
	Current            int         `json:"current"`
	Ready              int         `json:"ready"`
	Conditions         []Condition `json:"conditions,omitempty"`
	// PodsCreated counts the pods herd has ever created for this daemon,
	// on all nodes together, with DeploymentStatus.PodsCreated's rule:
	// pod k is named <daemon>-<node>-<suffix of k>.
	PodsCreated int64 `json:"podsCreated,omitempty"`
	// History is the rollout history, newest first (see RecordRevision).
	// Empty from agents that predate it.
	History []TemplateRevision `json:"history,omitempty"`
}

// GetKind implements Object.
func (*Daemon) GetKind() Kind { return KindDaemon }

// GetMeta implements Object.
func (d *Daemon) GetMeta() *ObjectMeta { return &d.Metadata }

// ---------------------------------------------------------------------------
// Pod

// Pod is one placed instance of a template: a systemd unit on one board.
type Pod struct {
	Kind     Kind       `json:"kind"`
	Metadata ObjectMeta `json:"metadata"`
	Spec     PodSpec    `json:"spec"`
	Status   PodStatus  `json:"status,omitzero"`
}

// OwnerRef names the object that created a pod.
type OwnerRef struct {
	Kind Kind   `json:"kind"`
	Name string `json:"name"`
}

// PodSpec is a pod's desired state: what to run and, once scheduled, where.
type PodSpec struct {
	Owner    OwnerRef    `json:"owner"`
	Template PodTemplate `json:"template"`
	// Revision is the hash of the owner's template this pod was made from.
	Revision string `json:"revision,omitempty"`
	// Node is where the scheduler placed the pod; empty while Pending.
	Node string `json:"node,omitempty"`
	// HostPorts are the ports assigned on the node, by port name, including
	// those picked for Port == 0.
	HostPorts map[string]int `json:"hostPorts,omitempty"`
	// Replaces names the pod this one was created to replace when a drain
	// or rebalance moves it: that pod is deleted once this one is
	// available.
	Replaces string `json:"replaces,omitempty"`
	// Secrets are the template's secrets as the controller found them when
	// it made the pod (PodRevision): names, versions and keys, never
	// values. The placer writes those keys' values to the board.
	Secrets []PodSecret `json:"secrets,omitempty"`
	// Schedule is the calendar event of a scheduled job's pod (copied
	// from JobSpec.Schedule): its unit is started by a timer.
	Schedule string `json:"schedule,omitempty"`
	// Concurrency is a scheduled job's pod's policy (copied from
	// JobSpec.Concurrency): "" or forbid, replace or allow.
	Concurrency string `json:"concurrency,omitempty"`
}

// PodPhase is where a pod is in its life.
type PodPhase string

// Pod phases.
const (
	PodPending   PodPhase = "Pending"
	PodScheduled PodPhase = "Scheduled"
	PodStarting  PodPhase = "Starting"
	PodRunning   PodPhase = "Running"
	PodFailed    PodPhase = "Failed"
	PodLost      PodPhase = "Lost"
	PodSucceeded PodPhase = "Succeeded"
)

// Terminal reports whether a pod in this phase is finished for good: Lost,
// Failed or Succeeded. A terminal pod has no unit on any board and is
// replaced (or kept, for Succeeded) by its owner; it never runs again.
func (ph PodPhase) Terminal() bool {
	return ph == PodLost || ph == PodFailed || ph == PodSucceeded
}

// Pending reports whether a pod in this phase waits to be placed: Pending,
// or no phase yet (a pod as created).
func (ph PodPhase) Pending() bool {
	return ph == PodPending || ph == ""
}

// Occupies reports whether a pod in this phase holds its node's resources
// and host ports: Scheduled, Starting or Running.
func (ph PodPhase) Occupies() bool {
	return ph == PodScheduled || ph == PodStarting || ph == PodRunning
}

// PodStatus is a pod's observed state.
type PodStatus struct {
	Phase PodPhase `json:"phase,omitempty"`
	// Unit is the systemd unit name, herd-<pod>.service.
	Unit string `json:"unit,omitempty"`
	// Restarts is systemd's NRestarts for the unit.
	Restarts int `json:"restarts,omitempty"`
	// Ready is true when the unit is active and readiness passes.
	Ready bool `json:"ready,omitempty"`
	// IP is the node's address.
	IP        string    `json:"ip,omitempty"`
	StartedAt time.Time `json:"startedAt,omitzero"`
	// LastRun is the last finished run of a job pod's unit (its owner
	// keeps the last runs in JobStatus.Runs).
	LastRun *JobRun `json:"lastRun,omitempty"`
	// Runs are the finished runs of a job pod with concurrency allow, one
	// per instance of its template that its board still shows, newest
	// start first, at most MaxJobRuns; ActiveRuns counts its instances
	// in progress.
	Runs       []JobRun    `json:"runs,omitempty"`
	ActiveRuns int         `json:"activeRuns,omitempty"`
	Message    string      `json:"message,omitempty"`
	Conditions []Condition `json:"conditions,omitempty"`
}

// GetKind implements Object.
func (*Pod) GetKind() Kind { return KindPod }

// GetMeta implements Object.
func (p *Pod) GetMeta() *ObjectMeta { return &p.Metadata }

// ---------------------------------------------------------------------------
// Service

// Service gives the ready pods matching a selector a stable set of
// endpoints (board IP:port).
type Service struct {
	Kind     Kind          `json:"kind"`
	Metadata ObjectMeta    `json:"metadata"`
	Spec     ServiceSpec   `json:"spec"`
	Status   ServiceStatus `json:"status,omitzero"`
}

// ServiceSpec is a Service's desired state.
type ServiceSpec struct {
	Selector map[string]string `json:"selector"`
	Ports    []ServicePort     `json:"ports"`
}

// ServicePort maps a service port name to a pod port.
type ServicePort struct {
	// Name of this service port. Default the target.
	Name string `json:"name,omitempty"`
	// Target is the pod port name (or number as a string) to expose.
	Target string `json:"target"`
	// Port, when set, is the port every board listens on and forwards to
	// a ready endpoint (the service proxy); the service owns it on every
	// board, so no pod is placed on it. 0: no proxy port.
	Port int `json:"port,omitempty"`
	// Protocol of Port: tcp or udp. Default tcp.
	Protocol string `json:"protocol,omitempty"`
}

// ServiceStatus lists the endpoints of ready pods.
type ServiceStatus struct {
	Endpoints  []Endpoint  `json:"endpoints,omitempty"`
	Conditions []Condition `json:"conditions,omitempty"`
}

// Endpoint is one ready pod's address for one service port.
type Endpoint struct {
	Port    string `json:"port"`
	Pod     string `json:"pod"`
	Node    string `json:"node"`
	Address string `json:"address"` // ip:port
}

// GetKind implements Object.
func (*Service) GetKind() Kind { return KindService }

// GetMeta implements Object.
func (s *Service) GetMeta() *ObjectMeta { return &s.Metadata }

// ---------------------------------------------------------------------------
// Raw objects: the store's kind-agnostic view.

// RawObject is any object with its spec and status left as JSON. The store
// works on RawObjects so it needs no knowledge of individual kinds.
type RawObject struct {
	Kind     Kind            `json:"kind"`
	Metadata ObjectMeta      `json:"metadata"`
	Spec     json.RawMessage `json:"spec,omitempty"`
	Status   json.RawMessage `json:"status,omitempty"`
}

// New returns a new empty object of kind k, or nil for an unknown kind.
func New(k Kind) Object {
	switch k {
	case KindNode:
		return &Node{Kind: k}
	case KindDeployment:
		return &Deployment{Kind: k}
	case KindDaemon:
		return &Daemon{Kind: k}
	case KindPod:
		return &Pod{Kind: k}
	case KindService:
		return &Service{Kind: k}
	case KindSecret:
		return &Secret{Kind: k}
	case KindJob:
		return &Job{Kind: k}
	case KindEvent:
		return &Event{Kind: k}
	}
	return nil
}

// ToRaw converts a typed object to its raw form.
func ToRaw(o Object) (RawObject, error) {
	b, err := json.Marshal(o)
	if err != nil {
		return RawObject{}, err
	}
	var r RawObject
	if err := json.Unmarshal(b, &r); err != nil {
		return RawObject{}, err
	}
	r.Kind = o.GetKind()
	return r, nil
}

// FromRaw converts a raw object to its typed form.
func FromRaw(r RawObject) (Object, error) {
	o := New(r.Kind)
	if o == nil {
		return nil, &UnknownKindError{Kind: string(r.Kind)}
	}
	b, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, o); err != nil {
		return nil, err
	}
	return o, nil
}

// FromRawList converts the raw objects of one kind (a store's List) to
// their typed form, leaving out any that does not decode as a T.
func FromRawList[T Object](kind Kind, raws []RawObject) []T {
	out := make([]T, 0, len(raws))
	for _, r := range raws {
		r.Kind = kind
		if o, err := FromRaw(r); err == nil {
			if t, ok := o.(T); ok {
				out = append(out, t)
			}
		}
	}
	return out
}

// UnknownKindError reports a kind herd does not know.
type UnknownKindError struct{ Kind string }

func (e *UnknownKindError) Error() string {
	return "api: unknown kind " + `"` + e.Kind + `"` + " (want nodes, deployments, daemons, pods, services, secrets or jobs)"
}
