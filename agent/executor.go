package agent

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"

	"golang.org/x/crypto/ssh"

	"github.com/herd-dev/herd/agent/httpapi"
	"github.com/herd-dev/herd/agent/placer"
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
	sc.Signers = []ssh.Signer{signer}
	sc.HostKeys = sshexec.HostKeyLookupFunc(func(node string) (string, ssh.PublicKey, error) {
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
	})
	ex, err := sshexec.New(sc)
	if err != nil {
		return nil, err
	}
	return &boardExecutor{ssh: ex}, nil
}

func (b *boardExecutor) Close() error { return b.ssh.Close() }

// ShowUnits lists the board's herd units and their unit files' hashes in
// one round trip (sshexec.Executor.ShowUnits).
func (b *boardExecutor) ShowUnits(ctx context.Context, node string) ([]units.UnitState, error) {
	return b.ssh.ShowUnits(ctx, node)
}

func (b *boardExecutor) PutFile(ctx context.Context, node, path string, content []byte, mode os.FileMode) error {
	special := mode & (os.ModeSetuid | os.ModeSetgid | os.ModeSticky)
	if err := b.ssh.PutFile(ctx, node, path, content, mode.Perm(), sshexec.PutFileOptions{MkdirAll: true}); err != nil {
		return err
	}
	if special == 0 {
		return nil
	}
	// sshexec writes permission bits only; add the special ones by argv.
	octal := fmt.Sprintf("%04o", uint32(mode.Perm())|specialBits(special))
	res, err := b.ssh.Run(ctx, node, []string{"chmod", octal, "--", path})
	if err != nil {
		return err
	}
	if res.ExitStatus != 0 {
		return fmt.Errorf("agent: chmod %s %s on %s: %s", octal, path, node, bytes.TrimSpace(res.Stderr))
	}
	return nil
}

func specialBits(m os.FileMode) uint32 {
	var b uint32
	if m&os.ModeSetuid != 0 {
		b |= 0o4000
	}
	if m&os.ModeSetgid != 0 {
		b |= 0o2000
	}
	if m&os.ModeSticky != 0 {
		b |= 0o1000
	}
	return b
}

func (b *boardExecutor) Remove(ctx context.Context, node, path string) error {
	return b.ssh.Remove(ctx, node, path)
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

func (b *boardExecutor) Run(ctx context.Context, node string, argv []string) (int, error) {
	res, err := b.ssh.Run(ctx, node, argv)
	if err != nil {
		return 0, err
	}
	return res.ExitStatus, nil
}

// Logs streams a pod's journal from the board it is placed on (the API's
// GET /v1/pods/{name}/logs). Any server with the cluster SSH key can serve
// it, not only the leader.
func (b *boardExecutor) Logs(ctx context.Context, pod *api.Pod, opts httpapi.LogOptions, w io.Writer) error {
	node, argv := logsCommand(pod, opts)
	return b.ssh.Stream(ctx, node, argv, w)
}

// logsCommand is the board and journalctl argv of a pod's logs: the unit
// comes from the pod's own name and the board from its binding, never from
// status, which must not steer what is read.
func logsCommand(pod *api.Pod, opts httpapi.LogOptions) (node string, argv []string) {
	return pod.Spec.Node, opts.JournalctlArgs(units.UnitName(pod.Metadata.Name))
}
