package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/units"
	"github.com/herd-dev/herd/units/sshexec"
)

// ErrRemove: a board cannot be removed (it is not recorded, or removing it
// would leave the cluster without a server or a quorum).
var ErrRemove = errors.New("bootstrap: remove")

// BoardPaths is everything herd puts on a board, besides the workload
// units and the authorized_keys line: what BoardFiles gives a server (a
// worker's files are a subset), what StalePaths names for either role,
// the binary an upgrade uploads, the resolver's drop-in
// (ResolvedDropInPath), and the folders the agent and the placer fill
// (ConfigDir with the pods' environment files, DataDir, the API socket's
// folder). Sorted; folders are removed with what they hold.
func BoardPaths() []string {
	files, _ := BoardFiles(BoardPlan{Role: Role{Server: true}}, Secrets{}, File{Path: BinaryPath})
	out := []string{NewBinaryPath, ConfigDir, units.EnvDir, DataDir, path.Dir(APISocket), ExecHome, ResolvedDropInPath}
	for _, f := range files {
		out = append(out, f.Path)
	}
	out = append(out, StalePaths(Role{})...)
	out = append(out, StalePaths(Role{Server: true})...)
	slices.Sort(out)
	return slices.Compact(out)
}

// CheckRemoval says whether the board named name may leave the cluster
// whose status is cst: not the last Raft server, and not a voter whose
// leaving leaves fewer alive voters than the remaining configuration's
// quorum. force skips both checks. Workers may always go.
func CheckRemoval(cst api.ClusterStatus, name string, force bool) error {
	voter := false
	var rest []string
	for _, s := range cst.Servers {
		if s.ID == name {
			voter = s.Suffrage == "voter"
			continue
		}
		if s.Suffrage == "voter" {
			rest = append(rest, s.ID)
		}
	}
	if !voter || force {
		return nil
	}
	if len(rest) == 0 {
		return fmt.Errorf("%w: %s is the cluster's last Raft server: removing it would leave no one holding the state (use --force to remove it anyway)", ErrRemove, name)
	}
	alive := 0
	for _, id := range rest {
		if cst.Alive(id) {
			alive++
		}
	}
	if quorum := len(rest)/2 + 1; alive < quorum {
		return fmt.Errorf("%w: removing %s leaves %d voters of which %d are alive, fewer than the %d a quorum needs: bring the others back first (or use --force)", ErrRemove, name, len(rest), alive, quorum)
	}
	return nil
}

// Gone reports whether st shows the board name out of the cluster: not an
// alive gossip member and not in the Raft configuration.
func Gone(st api.ClusterStatus, name string) (bool, string) {
	var why []string
	if st.Alive(name) {
		why = append(why, "still an alive gossip member")
	}
	if slices.ContainsFunc(st.Servers, func(s api.RaftServer) bool { return s.ID == name }) {
		why = append(why, "still a Raft server")
	}
	if st.Leader == "" {
		why = append(why, "no leader")
	}
	return len(why) == 0, strings.Join(why, "; ")
}

// HerdUnits returns the herd workload units among names (one a line, the
// first field of each: systemctl list-units or file names), by the one
// rule for pod unit names (api.PodFromUnitName), sorted and unique.
func HerdUnits(out []byte) []string {
	var us []string
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		if _, ok := api.PodFromUnitName(f[0]); ok {
			us = append(us, f[0])
		}
	}
	slices.Sort(us)
	return slices.Compact(us)
}

// RemoveOptions configure Remove.
type RemoveOptions struct {
	// Status asks the cluster for its status through any server.
	// Required.
	Status func(ctx context.Context) (api.ClusterStatus, error)
	// Force skips CheckRemoval.
	Force bool
	// WaitTimeout bounds waiting for the cluster to see the board gone
	// (default 30s).
	WaitTimeout time.Duration
}

// RemovedBoard is what Remove did on one board.
type RemovedBoard struct {
	Board StateBoard
	// Units are the workload units stopped and removed.
	Units []string
	// Removed are the paths removed (those that existed).
	Removed []string
}

// Remove takes herd off the recorded boards named by o.Boards (board
// arguments as given to bootstrap, or node names), one at a time: the
// cluster SSH key's authorized_keys line goes first (the leader can no
// longer act there), then herd.service is stopped and disabled (the agent
// leaves gossip: a server leaves Raft, a worker's node becomes Left and
// its pods are replaced elsewhere), then every herd-*.service unit is
// stopped, disabled and removed with its environment file, then
// BoardPaths (systemd-resolved reloaded when its drop-in was among them
// and it runs); it waits for the cluster to see the board gone and drops it
// from the state folder. It refuses what CheckRemoval refuses.
func Remove(ctx context.Context, o Options, ro RemoveOptions) ([]RemovedBoard, error) {
	if ro.Status == nil {
		return nil, fmt.Errorf("%w: Status is required", ErrRemove)
	}
	if o.Auth == nil {
		return nil, errors.New("bootstrap: Auth is nil")
	}
	if ro.WaitTimeout <= 0 {
		ro.WaitTimeout = 30 * time.Second
	}
	progress := o.Progress
	if progress == nil {
		progress = func(string, string) {}
	}
	st, _, err := LoadState(o.StateDir, o.Cluster, false)
	if err != nil {
		return nil, err
	}
	var picked []StateBoard
	for _, arg := range o.Boards {
		sb, err := findBoard(st, o.SSHConfig, arg)
		if err != nil {
			return nil, err
		}
		if !slices.ContainsFunc(picked, func(x StateBoard) bool { return x.Target == sb.Target }) {
			picked = append(picked, sb)
		}
	}
	var out []RemovedBoard
	for _, sb := range picked {
		say := func(msg string) { progress(sb.Name, msg) }
		cst, err := ro.Status(ctx)
		if err != nil && !ro.Force {
			return out, fmt.Errorf("%w: %s: cluster status: %v (use --force to remove it without asking the cluster)", ErrRemove, sb.Name, err)
		}
		if err := CheckRemoval(cst, sb.Name, ro.Force); err != nil {
			return out, err
		}
		rb, err := o.removeBoard(ctx, st, sb, say)
		if err != nil {
			say("failed: " + err.Error())
			return out, err
		}
		wctx, cancel := context.WithTimeout(ctx, ro.WaitTimeout)
		last, gone := "", false
		for !gone && wctx.Err() == nil {
			var why string
			if cst, err := ro.Status(wctx); err == nil {
				gone, why = Gone(cst, sb.Name)
			} else {
				why = err.Error()
			}
			if !gone && why != last {
				last = why
				say("waiting for the cluster: " + why)
			}
			if !gone {
				select {
				case <-wctx.Done():
				case <-time.After(250 * time.Millisecond):
				}
			}
		}
		cancel()
		st.Boards = slices.DeleteFunc(st.Boards, func(x StateBoard) bool { return x.Target == sb.Target })
		if err := st.Save(); err != nil {
			return out, err
		}
		out = append(out, rb)
		if !gone {
			return out, fmt.Errorf("%w: %s: herd is off the board, but the cluster still shows it after %v: %s", ErrRemove, sb.Name, ro.WaitTimeout, last)
		}
		say(fmt.Sprintf("ok: removed (%d units, %d paths); the cluster no longer has it", len(rb.Units), len(rb.Removed)))
	}
	return out, nil
}

// findBoard finds the recorded board given as arg: its node name, the
// argument it was bootstrapped with, or the SSH target arg resolves to.
func findBoard(st *State, cfg *SSHConfig, arg string) (StateBoard, error) {
	for _, b := range st.Boards {
		if b.Name == arg || b.Arg == arg || b.BoardArg() == arg {
			return b, nil
		}
	}
	if t, err := cfg.Resolve(arg); err == nil {
		if b, ok := st.Board(t.Addr()); ok {
			return b, nil
		}
	}
	var names []string
	for _, b := range st.Boards {
		names = append(names, b.Name)
	}
	return StateBoard{}, fmt.Errorf("%w: %q is not a board of cluster %q (boards: %s)", ErrRemove, arg, st.Cluster, strings.Join(names, ", "))
}

// removeBoard takes herd off one board.
func (o Options) removeBoard(ctx context.Context, st *State, sb StateBoard, say func(string)) (RemovedBoard, error) {
	rb := RemovedBoard{Board: sb}
	t, err := o.SSHConfig.Resolve(sb.BoardArg())
	if err != nil {
		return rb, err
	}
	b := &board{res: &BoardResult{Target: t, Label: boardLabel(t), Name: sb.Name, Server: sb.Server}}
	defer func() {
		if b.close != nil {
			b.close()
		}
	}()
	if err := o.probe(ctx, b, say); err != nil {
		return rb, err
	}
	node, r := b.res.Label, b.remote

	// The leader's access first, so that it cannot put units back.
	if err := o.removeClusterKey(ctx, b, st, say); err != nil {
		return rb, err
	}

	// Sessions the executor account still has (the leader's pooled
	// connection) end now: the key is gone, and userdel below refuses an
	// account in use.
	hasAccount, err := hasExecAccount(ctx, r, node)
	if err != nil {
		return rb, err
	}
	if hasAccount {
		if _, err := runTolerant(ctx, r, node, []string{"pkill", "-KILL", "-u", ExecUser}); err != nil {
			return rb, err
		}
	}

	// The agent: a graceful stop leaves gossip (and hands leadership on).
	say("systemctl disable --now " + UnitName)
	if _, err := r.Run(ctx, node, []string{"systemctl", "disable", "--now", UnitName}); err != nil {
		return rb, err
	}
	if err := stopWorkloads(ctx, b, &rb, say); err != nil {
		return rb, err
	}
	if err := removeHerdFiles(ctx, b, &rb, say); err != nil {
		return rb, err
	}
	for _, step := range ResolverRemoveSteps(slices.Contains(rb.Removed, ResolvedDropInPath), b.probe.Resolved) {
		say(strings.Join(step, " "))
		if err := runOK(ctx, r, node, step); err != nil {
			return rb, err
		}
	}
	if hasAccount {
		if err := runOK(ctx, r, node, []string{"userdel", "--", ExecUser}); err != nil {
			return rb, err
		}
	}
	if err := runOK(ctx, r, node, []string{"systemctl", "daemon-reload"}); err != nil {
		return rb, err
	}
	// Forget failed units of the removed files; nothing to forget is fine.
	r.Run(ctx, node, append([]string{"systemctl", "reset-failed", "--", UnitName}, rb.Units...))
	return rb, nil
}

// removeClusterKey takes the cluster key's line out of the executor
// account's authorized_keys and out of root's (a board bootstrapped before
// the executor account).
func (o Options) removeClusterKey(ctx context.Context, b *board, st *State, say func(string)) error {
	node, r, root := b.res.Label, b.remote, b.root
	managed, err := st.Secrets.PublicKeys()
	if err != nil {
		return fmt.Errorf("%w: cluster ssh key: %v", ErrState, err)
	}
	for _, p := range []string{ExecAuthKeysPath, RootAuthKeysPath} {
		cur, err := r.ReadFile(ctx, node, root+p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if out, changed := SetAuthorizedKeys(cur, sshKeyComment(o.Cluster), managed, nil); changed {
			say("removing the cluster SSH key from " + p)
			if err := r.PutFile(ctx, node, root+p, out, 0o600); err != nil {
				return err
			}
		}
	}
	return nil
}

// stopWorkloads stops and disables the board's workload units, found by
// the unit naming rule among systemd's units and the unit files, and
// records them in rb.Units.
func stopWorkloads(ctx context.Context, b *board, rb *RemovedBoard, say func(string)) error {
	node, r, root := b.res.Label, b.remote, b.root
	dir := root + sshexec.UnitDir
	listed, err := r.Run(ctx, node, []string{"systemctl", "list-units", "--all", "--plain", "--no-legend", "--no-pager", "--type=service", "--", api.UnitPrefix + "*" + api.UnitSuffix})
	if err != nil {
		return err
	}
	files, err := r.Run(ctx, node, []string{"find", dir, "-maxdepth", "1", "-name", api.UnitPrefix + "*" + api.UnitSuffix, "-printf", "%f\n"})
	if err != nil {
		return err
	}
	rb.Units = HerdUnits(append(listed.Stdout, files.Stdout...))
	if len(rb.Units) > 0 {
		say(fmt.Sprintf("stopping %d workload units: %s", len(rb.Units), strings.Join(rb.Units, ", ")))
		if err := runOK(ctx, r, node, append([]string{"systemctl", "disable", "--now", "--"}, rb.Units...)); err != nil {
			return err
		}
	}
	return nil
}

// removeHerdFiles removes the workload units' files and those of herd's
// files, keys and state the board has, recording them in rb.Removed.
func removeHerdFiles(ctx context.Context, b *board, rb *RemovedBoard, say func(string)) error {
	node, r, root := b.res.Label, b.remote, b.root
	var rm []string
	for _, u := range rb.Units {
		rm = append(rm, root+path.Join(sshexec.UnitDir, u), root+units.EnvFilePath(u))
	}
	paths := BoardPaths()
	modes, err := runTolerant(ctx, r, node, append([]string{"stat", "-c", "%a %n"}, prefixed(root, paths)...))
	if err != nil {
		return err
	}
	have := ParseModes(modes, root)
	var shown []string
	for _, p := range paths {
		if _, ok := have[p]; ok {
			rb.Removed = append(rb.Removed, p)
			rm = append(rm, root+p)
			if !slices.ContainsFunc(shown, func(d string) bool { return strings.HasPrefix(p, d+"/") }) {
				shown = append(shown, p)
			}
		}
	}
	if len(rm) > 0 {
		say("removing " + strings.Join(shown, ", "))
		if err := runOK(ctx, r, node, append([]string{"rm", "-rf", "--"}, rm...)); err != nil {
			return err
		}
	}
	return nil
}

// hasExecAccount says whether the board has herd's executor account (the
// one ensureAccount made; an account of that name with another home is not
// herd's and is left alone).
func hasExecAccount(ctx context.Context, r Remote, node string) (bool, error) {
	res, err := r.Run(ctx, node, []string{"getent", "passwd", ExecUser})
	if err != nil {
		return false, err
	}
	return res.ExitStatus == 0 && CheckAccount(res.Stdout) == nil, nil
}

func prefixed(root string, paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = root + p
	}
	return out
}
