//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/herd-dev/herd/api"
)

// The stranger: a host on the lab network that holds no key, in a network
// namespace of its own attached to the lab bridge (see scripts/lab.d/net.sh;
// `scripts/lab down` removes it too).
const (
	StrangerNetns = "herd-stranger"
	StrangerVeth  = "herdlab-x0"
	StrangerIP    = "10.77.0.250"
	labBridge     = "herdlab0"
)

// raftPort is where a server's Raft/forwarding listener is.
const raftPort = 7947

// StartStranger creates the stranger's namespace (replacing a leftover
// one) with StrangerIP on the lab bridge.
func (f *Fleet) StartStranger(ctx context.Context) error {
	f.StopStranger(ctx)
	steps := [][]string{
		{"ip", "netns", "add", StrangerNetns},
		{"ip", "-n", StrangerNetns, "link", "set", "lo", "up"},
		{"ip", "link", "add", StrangerVeth, "type", "veth", "peer", "name", "eth0", "netns", StrangerNetns},
		{"ip", "link", "set", StrangerVeth, "master", labBridge},
		{"ip", "link", "set", StrangerVeth, "up"},
		{"ip", "-n", StrangerNetns, "addr", "add", StrangerIP + "/24", "dev", "eth0"},
		{"ip", "-n", StrangerNetns, "link", "set", "eth0", "up"},
	}
	for _, s := range steps {
		if _, err := f.run(ctx, "", s[0], s[1:]...); err != nil {
			return err
		}
	}
	return nil
}

// StopStranger removes the stranger's namespace and veth, if any.
func (f *Fleet) StopStranger(ctx context.Context) {
	_, _ = f.run(ctx, "", "ip", "link", "del", StrangerVeth)
	_, _ = f.run(ctx, "", "ip", "netns", "del", StrangerNetns)
}

// Stranger runs a command of this host inside the stranger's namespace.
func (f *Fleet) Stranger(ctx context.Context, stdin string, args ...string) (string, error) {
	out, err := f.run(ctx, stdin, "ip", append([]string{"netns", "exec", StrangerNetns}, args...)...)
	return string(out), err
}

// StrangerCmd is Stranger as an unstarted command (for attacks that run
// in the background while the test does something else).
func (f *Fleet) StrangerCmd(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", StrangerNetns}, args...)...)
	cmd.Dir = f.Root
	cmd.Env = cleanEnv()
	return cmd
}

// BuildHostileTool builds e2e/hostiletool (static, the host's
// architecture: the lab's boards share it) into the fleet's directory.
func (f *Fleet) BuildHostileTool(ctx context.Context) (string, error) {
	out := filepath.Join(f.Dir, "hostiletool")
	cmd := exec.CommandContext(ctx, "go", "build", "-tags", "e2e", "-o", out, "./e2e/hostiletool")
	cmd.Dir = f.Root
	cmd.Env = append(cleanEnv(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%w: go build ./e2e/hostiletool: %v\n%s", ErrCommand, err, b)
	}
	return out, nil
}

// CopyTo writes the local file to path on board, mode 0755.
func (f *Fleet) CopyTo(ctx context.Context, board, local, path string) error {
	b, err := os.ReadFile(local)
	if err != nil {
		return err
	}
	_, err = f.SSH(ctx, board, string(b), "cat > "+shQuote(path)+" && chmod 0755 "+shQuote(path))
	return err
}

// AsUser runs a shell command line on board as user (its primary group,
// no supplementary groups), the way a process of a pod declared with that
// user runs: setpriv from a root SSH session.
func (f *Fleet) AsUser(ctx context.Context, board, user, stdin, cmdline string) (string, error) {
	return f.SSH(ctx, board, stdin, fmt.Sprintf("setpriv --reuid=%s --regid=%s --clear-groups -- /bin/sh -c %s",
		shQuote(user), shQuote(primaryGroup(user)), shQuote(cmdline)))
}

func primaryGroup(user string) string {
	if user == "nobody" {
		return "nogroup"
	}
	return user
}

// shQuote quotes s for a POSIX shell.
func shQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// ClusterState is what the hostile scenarios compare before and after an
// attack: every object by kind/name with its resourceVersion (nodes by
// phase and address: their status is what a forged write would change),
// and the herd units (active ones and unit files) on every board.
type ClusterState struct {
	Objects map[string]string
	Units   map[string]BoardUnits
}

// State reads the ClusterState through via.
func (f *Fleet) State(ctx context.Context, via string) (ClusterState, error) {
	st := ClusterState{Objects: map[string]string{}}
	for _, k := range api.Kinds {
		if k == api.KindNode {
			nodes, err := f.Nodes(ctx, via)
			if err != nil {
				return st, err
			}
			for _, n := range nodes {
				st.Objects[string(k)+"/"+n.Metadata.Name] = fmt.Sprintf("%s %s", n.Status.Phase, n.Status.Address)
			}
			continue
		}
		objs, err := list[api.RawObject](ctx, f, via, k)
		if err != nil {
			return st, err
		}
		for _, o := range objs {
			st.Objects[string(k)+"/"+o.Metadata.Name] = fmt.Sprintf("rv=%d", o.Metadata.ResourceVersion)
		}
	}
	u, err := f.FleetUnits(ctx, f.Boards, "herd-*")
	if err != nil {
		return st, err
	}
	for b, bu := range u {
		slices.Sort(bu.Active)
		slices.Sort(bu.Files)
		bu.Loaded = nil // inactive leftovers come and go with systemd's GC
		u[b] = bu
	}
	st.Units = u
	return st, nil
}

// Token is the API token herdctl's context (or the cluster state bootstrap
// wrote) carries, "" when there is none.
func (f *Fleet) Token() string {
	var c struct {
		Contexts []struct {
			Name      string `toml:"name"`
			Token     string `toml:"token"`
			TokenFile string `toml:"token_file"`
		} `toml:"context"`
	}
	if _, err := toml.DecodeFile(f.ConfigPath(), &c); err == nil {
		for _, ctx := range c.Contexts {
			if ctx.Name != f.Cluster {
				continue
			}
			if ctx.Token != "" {
				return ctx.Token
			}
			if ctx.TokenFile != "" {
				if b, err := os.ReadFile(ctx.TokenFile); err == nil {
					return strings.TrimSpace(string(b))
				}
			}
		}
	}
	files, _ := filepath.Glob(filepath.Join(f.Dir, "state", "*token*"))
	for _, file := range files {
		if b, err := os.ReadFile(file); err == nil && len(strings.TrimSpace(string(b))) > 0 {
			return strings.TrimSpace(string(b))
		}
	}
	return ""
}

// JSONLines decodes one JSON object a line (hostiletool's reports).
func JSONLines(out string) ([]map[string]any, error) {
	var res []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line = strings.TrimSpace(line); line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			return res, fmt.Errorf("e2e: hostiletool line %q: %w", line, err)
		}
		res = append(res, m)
	}
	return res, nil
}
