package agent

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"

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

// showScript lists every herd unit on a board in one round trip: the
// `systemctl show` blocks of those systemd knows or has files for, then a
// marker line, then `sha256sum` of each unit file. It is a fixed script: no
// value from outside reaches it.
const showScript = `cd /etc/systemd/system 2>/dev/null || exit 0
a=$(systemctl list-units --all --plain --no-legend --no-pager --type=service -- 'herd-*.service')
f=$(for x in herd-*.service; do [ -f "$x" ] && echo "$x"; done)
u=$(printf '%s\n%s\n' "$a" "$f" | while read -r n _; do case $n in herd-*.service) echo "$n";; esac; done | sort -u)
[ -n "$u" ] || exit 0
systemctl show --all --no-pager --property=PROPS -- $u
echo '@@herd-hashes@@'
for x in $f; do sha256sum -- "$x"; done
`

func (b *boardExecutor) ShowUnits(ctx context.Context, node string) ([]units.UnitState, error) {
	script := strings.Replace(showScript, "PROPS", strings.Join(units.ShowProperties(), ","), 1)
	res, err := b.ssh.Run(ctx, node, []string{"sh", "-c", script, "herd-show"})
	if err != nil {
		return nil, err
	}
	if res.ExitStatus != 0 {
		return nil, fmt.Errorf("agent: listing units on %s: exit %d: %s", node, res.ExitStatus, bytes.TrimSpace(res.Stderr))
	}
	return parseShowOutput(res.Stdout)
}

// parseShowOutput reads showScript's output.
func parseShowOutput(out []byte) ([]units.UnitState, error) {
	show, hashes, _ := bytes.Cut(out, []byte("@@herd-hashes@@\n"))
	states, err := units.ParseShow(show)
	if err != nil {
		return nil, err
	}
	byUnit := make(map[string]int, len(states))
	for i, s := range states {
		byUnit[s.Unit] = i
	}
	sc := bufio.NewScanner(bytes.NewReader(hashes))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 || !units.IsHerdUnit(f[1]) {
			continue
		}
		if i, ok := byUnit[f[1]]; ok {
			states[i].FileHash = f[0]
		} else {
			byUnit[f[1]] = len(states)
			states = append(states, units.UnitState{Unit: f[1], FileHash: f[0]})
		}
	}
	return states, nil
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
	unit := pod.Status.Unit
	if unit == "" {
		unit = units.UnitName(pod.Metadata.Name)
	}
	return b.ssh.Stream(ctx, pod.Spec.Node, opts.JournalctlArgs(unit), w)
}
