// Package api owns herd's shared object model: the kinds a user declares
// (Deployment, Daemon, Service), the kinds the control plane maintains (Node,
// Pod), their metadata, spec and status, and the rules every object passes at
// admission: strict TOML manifest decoding, validation with field paths, and
// defaulting so that the stored spec is already normalized. The rules a pod
// must meet to become a systemd unit live here too (unitrules.go): the
// renderer in package units calls ValidateRenderable and QuoteUnitWord, so
// admission and rendering cannot disagree.
//
// Everything here is a value type with no I/O; the raftstore stores these
// objects as JSON, the agent serves them over HTTP and herdctl prints them.
package api
