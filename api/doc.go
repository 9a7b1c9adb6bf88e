// Package api owns herd's shared object model: the kinds a user declares
// (Deployment, Daemon, Service, Job), the kinds the control plane maintains (Node,
// Pod), their metadata, spec and status, and the rules every object passes at
// admission: strict TOML manifest decoding, validation with field paths, and
// defaulting so that the stored spec is already normalized. The rules a pod
// must meet to become a systemd unit live here too (unitrules.go): the
// renderer in package units calls ValidateRenderable and QuoteUnitWord, so
// admission and rendering cannot disagree. So do the object rules other
// packages apply: names and labels (ValidateName, ValidateLabelKey, and
// NameFromHost, a board's default name), node selectors
// (Node.MatchesNodeSelector), quantities and what a pod reserves
// (ParseMemory, ParseCPU, Resources.Request), default port names
// (PodTemplate.PortName), phases (PodPhase.Pending, Terminal, Occupies),
// conditions (SetCondition, RemoveCondition, FindCondition), how an object
// is named in errors (ObjectRef), file modes (File.Perm, FileModeOf,
// OctalMode), systemd's version (ParseSystemdVersion, SystemdMajor), the
// rollout history of deployments and daemons
// (history.go: RecordRevision numbers and bounds it, UndoTarget picks what
// an undo goes back to), and what a board can enforce (capabilities.go:
// NodeStatus.UnenforcedLimit, which the scheduler applies, and
// NodeStatus.Warnings, which herdctl prints), and devices (devices.go: the
// DeviceClasses boards advertise and templates may ask for, DeviceNode and
// SortDevices, which the agent and gossip use, and
// BoardFacts.MissingDevice, which the scheduler applies), and artifacts
// (artifacts.go: their admission rules, ArtifactURLProblem and IsSHA256,
// which the board's fetcher applies again, and HerdDirs), secrets
// (secret.go: the Secret kind, its sealed values and the plain-value
// request ValidateSecretRequest checks, key names, CredentialID,
// SecretVersion and PodRevision, which folds the versions of a template's
// secrets into its pods' revision, and SecretUsers, which the API applies
// before a delete), and jobs (job.go: defaults, admission, JobBackoff,
// RecordRun, the pod predicates RunsToCompletion, Scheduled, ReplacesRuns
// and OverlapsRuns, TimerName, KickUnitName, and the names of an allow
// job's runs: TemplateUnitName, InstanceUnitName, InstanceGlob and
// PodFromInstanceName; calendar.go: ValidateCalendar,
// herd's check of systemd's OnCalendar= syntax). BoardFacts is the
// one shape of a board's facts from the agent's reading to NodeStatus.
//
// The API's wire types live here as well (wire.go: request and response
// bodies and apply actions, ClusterStatus and the gossip MemberState that
// gossip and the controllers use too, APIError and its codes;
// ValidationErrors; token.go: the API token and token file format), so
// the agent's HTTP server and its client share them without either
// importing the other.
//
// Everything here is a value type with no I/O (ReadTokenFile reads one
// bounded file); the raftstore stores these
// objects as JSON, the agent serves them over HTTP and herdctl prints them.
package api
