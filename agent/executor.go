package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/herd-dev/herd/agent/httpapi"
	"github.com/herd-dev/herd/agent/placer"
	"github.com/herd-dev/herd/agent/unitreport"
	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/gossip"
	"github.com/herd-dev/herd/units"
	"github.com/herd-dev/herd/units/sshexec"
)

// boardExecutor adapts the SSH executor to the placer's Executor. Boards
// are reached at the SSH address and verified against the host key they
// announce in gossip (pinned per node); there is no trust on first use.
type boardExecutor struct {
	ssh *sshexec.Executor
}

var _ placer.Executor = (*boardExecutor)(nil)

// newBoardExecutor builds the SSH executor from the agent's cluster SSH
// key and gossip's view of the boards.
func newBoardExecutor(cfg Config, g *gossip.Gossip) (*boardExecutor, error) {
	signer, err := sshexec.LoadKey(cfg.SSHKeyFile)
	if err != nil {
		return nil, fmt.Errorf("agent: cluster ssh key: %w", err)
	}
	sc := sshexec.DefaultConfig()
	sc.User = cfg.SSHUser
	sc.BoardSession = cfg.BoardSession != "off"
	sc.Signers = []ssh.Signer{signer}
	sc.HostKeys = sshexec.HostKeyLookupFunc(func(node string) (string, ssh.PublicKey, error) {
		return announcedHost(g, node)
	})
	ex, err := sshexec.New(sc)
	if err != nil {
		return nil, err
	}
	return &boardExecutor{ssh: ex}, nil
}

// announcedHost returns the SSH address and host key node announces in
// gossip: the key the leader's SSH connections verify and the key unit
// reports from node must be signed with.
func announcedHost(g *gossip.Gossip, node string) (string, ssh.PublicKey, error) {
	for _, m := range g.Members() {
		if m.Name != node {
			continue
		}
		if m.Meta.SSHAddr == "" {
			return "", nil, fmt.Errorf("agent: node %s announces no ssh address", node)
		}
		if m.Meta.HostKey == "" {
			return m.Meta.SSHAddr, nil, fmt.Errorf("agent: node %s announces no ssh host key (ssh_host_key_file)", node)
		}
		k, _, _, _, err := ssh.ParseAuthorizedKey([]byte(m.Meta.HostKey))
		if err != nil {
			return "", nil, fmt.Errorf("agent: node %s host key: %w", node, err)
		}
		return m.Meta.SSHAddr, k, nil
	}
	return "", nil, fmt.Errorf("agent: node %s is not a gossip member", node)
}

func (b *boardExecutor) Close() error { return b.ssh.Close() }

var _ standbyExecutor = (*boardExecutor)(nil)

// CloseIdle closes the connections no operation has used for idle
// (sshexec.Executor.CloseIdle).
func (b *boardExecutor) CloseIdle(idle time.Duration) []string { return b.ssh.CloseIdle(idle) }

var _ placer.Silencer = (*boardExecutor)(nil)

var _ placer.Warmer = (*boardExecutor)(nil)

// Warm dials node and starts its board session ahead of the first call
// (sshexec.Executor.Warm).
func (b *boardExecutor) Warm(ctx context.Context, node string) error { return b.ssh.Warm(ctx, node) }

// Silence is how long the pooled connection to node has had a keepalive
// unanswered or unacknowledged (sshexec.Executor.Silence): the placer's
// witness fails at once on a board that stopped answering.
func (b *boardExecutor) Silence(node string) time.Duration { return b.ssh.Silence(node) }

// ShowUnits lists the board's herd units and their unit files' hashes in
// one round trip (sshexec.Executor.ShowUnits).
func (b *boardExecutor) ShowUnits(ctx context.Context, node string) ([]units.UnitState, error) {
	return b.ssh.ShowUnits(ctx, node)
}

var _ placer.MarkedLister = (*boardExecutor)(nil)

// ShowUnitsMarked is ShowUnits plus the mark of the unit report the
// board's agent last began (its seq file, read in the same round trip); a
// board without one, or with an unreadable one, gives the zero mark, which
// covers no report.
func (b *boardExecutor) ShowUnitsMarked(ctx context.Context, node string) ([]units.UnitState, unitreport.Mark, error) {
	us, raw, err := b.ssh.ShowUnitsMarked(ctx, node)
	if err != nil || raw == "" {
		return us, unitreport.Mark{}, err
	}
	m, perr := unitreport.ParseSeqFile([]byte(raw))
	if perr != nil {
		return us, unitreport.Mark{}, nil
	}
	return us, m, nil
}

// PutFile writes a file through the board helper (`herd board put-file`),
// which follows no symbolic link in any component of path; a refusal
// matches placer.ErrFileRefused.
func (b *boardExecutor) PutFile(ctx context.Context, node, path string, content []byte, opt placer.FileOptions) error {
	err := b.ssh.WriteFileNoFollow(ctx, node, path, content, sshexec.NoFollowOptions{
		Mode: api.OctalMode(opt.Mode), AllowSetID: opt.AllowSetID, ParentMode: uint32(opt.ParentMode.Perm()),
	})
	return refused(err)
}

// Remove removes a file through the board helper (`herd board rm-file`),
// following no symbolic link; a refusal matches placer.ErrFileRefused.
func (b *boardExecutor) Remove(ctx context.Context, node, path string) error {
	return refused(b.ssh.RemoveNoFollow(ctx, node, path))
}

// refused makes a board's refusal match placer.ErrFileRefused.
func refused(err error) error {
	if errors.Is(err, sshexec.ErrRefused) {
		return fmt.Errorf("%w: %w", placer.ErrFileRefused, err)
	}
	return err
}

func (b *boardExecutor) ReadFile(ctx context.Context, node, path string) ([]byte, error) {
	return b.ssh.ReadFile(ctx, node, path)
}

func (b *boardExecutor) Systemctl(ctx context.Context, node, verb string, units ...string) error {
	if verb == placer.VerbDaemonReload {
		return b.ssh.DaemonReload(ctx, node)
	}
	return b.ssh.Systemctl(ctx, node, verb, units...)
}

// Probe runs an exec readiness check as a transient systemd service with
// the pod's user, working directory and env file (sshexec.ProbeArgv).
func (b *boardExecutor) Probe(ctx context.Context, node string, c placer.ProbeCommand) (int, error) {
	return b.ssh.Probe(ctx, node, sshexec.ProbeCommand{
		User: c.User, WorkingDir: c.WorkingDir, EnvironmentFile: c.EnvironmentFile, Timeout: c.Timeout, Argv: c.Argv,
	})
}

// Logs streams a pod's journal from the board it is placed on (the API's
// GET /v1/pods/{name}/logs). Any server with the cluster SSH key can serve
// it, not only the leader. The unit comes from the pod's own name, never
// from its status (which a client could have written).
func (b *boardExecutor) Logs(ctx context.Context, pod *api.Pod, opts httpapi.LogOptions, w io.Writer) error {
	node, argv := logsCommand(pod, opts)
	return b.ssh.Stream(ctx, node, argv, w)
}

// logsCommand is the board and journalctl argv of a pod's logs: the unit
// comes from the pod's own name and the board from its binding, never from
// status, which must not steer what is read. A job pod with concurrency
// allow runs as instances of its template: its journal is theirs, all of
// them: api.InstanceGlob, a pattern journalctl matches against the units
// its journal knows (with systemd's own lines on each run), or, when
// following, the match _SYSTEMD_SLICE=api.InstanceSlice, which also
// catches runs that start later (the runs' output only). Only the pod's
// name is in either.
func logsCommand(pod *api.Pod, opts httpapi.LogOptions) (node string, argv []string) {
	name := pod.Metadata.Name
	switch {
	case pod.Spec.OverlapsRuns() && opts.Follow:
		return pod.Spec.Node, opts.JournalctlMatchArgs("_SYSTEMD_SLICE=" + api.InstanceSlice(name))
	case pod.Spec.OverlapsRuns():
		return pod.Spec.Node, opts.JournalctlArgs(api.InstanceGlob(name))
	}
	return pod.Spec.Node, opts.JournalctlArgs(api.UnitName(name))
}
