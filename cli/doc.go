// Package cli owns herdctl, the command-line client of a herd cluster: its
// commands and flags (cobra), the herdctl configuration file and how an
// agent address is chosen, loading manifests from files, folders and stdin,
// local validation before anything is sent, and everything herdctl prints
// (tables, describe blocks, apply results, diffs, rollout progress and
// history, the event timeline), and streaming a pod's journal to the
// terminal. `rollout undo` writes an earlier template from the object's
// history (api.UndoTarget) back into its spec, compare-and-swap, re-reading
// on a conflict. `herdctl dashboard` serves the agent's page to the browser
// through a read-only proxy on 127.0.0.1 that adds the token, behind a
// one-time code and a session cookie (dashboard.go).
//
// Printing is pure: tables, describe blocks and diffs are functions of
// objects and a "now" and are golden-tested. Talking to the agent goes
// through the small apiClient interface, implemented by *client.Client.
// cmd/herdctl is a one-line main around Run.
package cli
