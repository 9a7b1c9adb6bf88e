package bootstrap

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/units/sshexec"
)

// NewBinaryPath is where Upgrade uploads the new herd binary, beside the
// running one, before renaming it over BinaryPath (a rename within one
// folder is atomic).
const NewBinaryPath = BinaryPath + ".new"

// RestartSignal is agent.RestartSignal by name (for systemctl kill -s):
// the agent stops without leaving gossip and systemd starts it again, so
// the cluster sees a short absence, not a board that left.
const RestartSignal = "SIGUSR1"

// DefaultRestartWait bounds waiting for an agent to exit on RestartSignal;
// an agent older than it ignores the signal and is then killed (SIGKILL is
// as safe for the state and the workloads: systemd restarts the agent).
const DefaultRestartWait = 10 * time.Second

// firstStateFormat is the state format of agents that do not report one
// (raftstore.StateFormat 1 predates the field).
const firstStateFormat = 1

// ErrUpgrade: an upgrade cannot start or go on.
var ErrUpgrade = errors.New("bootstrap: upgrade")

// ErrDowngrade: the new herd reads an older state format than the cluster
// runs, so it could not read the cluster's snapshots.
var ErrDowngrade = fmt.Errorf("%w: downgrade across a state format change", ErrUpgrade)

// EffectiveStateFormat is the state format an agent reporting f runs: f,
// or the first format for agents older than the field (0).
func EffectiveStateFormat(f int) int {
	if f <= 0 {
		return firstStateFormat
	}
	return f
}

// ParseVersionOutput reads what `herd version -o json` printed. Output of
// a herd older than -o json ("herd VERSION") is accepted with the first
// state format.
func ParseVersionOutput(out []byte) (api.VersionInfo, error) {
	out = bytes.TrimSpace(out)
	if v, ok := bytes.CutPrefix(out, []byte("herd ")); ok && !bytes.ContainsAny(v, " \n") && len(v) > 0 {
		return api.VersionInfo{Version: string(v), StateFormat: firstStateFormat}, nil
	}
	var v api.VersionInfo
	if err := json.Unmarshal(out, &v); err != nil {
		return api.VersionInfo{}, fmt.Errorf("%w: herd version -o json printed %q: %v", ErrUpgrade, clip(out), err)
	}
	if v.Version == "" {
		return api.VersionInfo{}, fmt.Errorf("%w: herd version -o json printed no version: %q", ErrUpgrade, clip(out))
	}
	v.StateFormat = EffectiveStateFormat(v.StateFormat)
	return v, nil
}

func clip(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "..."
	}
	return string(b)
}

// CompareVersions orders two herd versions of the form [v]MAJOR.MINOR.PATCH
// with an optional -suffix (git describe: v1.2.3-4-gabc): -1, 0, 1, and ok
// false when either is not of that form ("dev", a bare commit), which
// cannot be ordered.
func CompareVersions(a, b string) (c int, ok bool) {
	pa, oka := parseVersion(a)
	pb, okb := parseVersion(b)
	if !oka || !okb {
		return 0, false
	}
	for i := range pa {
		if pa[i] != pb[i] {
			if pa[i] < pb[i] {
				return -1, true
			}
			return 1, true
		}
	}
	return 0, true
}

// parseVersion reads MAJOR.MINOR.PATCH and, from a git describe suffix,
// the commits since (v1.2.3-4-gabc: 4), into four numbers.
func parseVersion(s string) ([4]int, bool) {
	var out [4]int
	s = strings.TrimPrefix(s, "v")
	core, rest, _ := strings.Cut(s, "-")
	parts := strings.Split(core, ".")
	if len(parts) != 3 {
		return out, false
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return out, false
		}
		out[i] = n
	}
	if n, _, ok := strings.Cut(rest, "-"); ok {
		if c, err := strconv.Atoi(n); err == nil {
			out[3] = c
		}
	}
	return out, true
}

// UpgradeAction is what Upgrade does with one board.
type UpgradeAction string

// Upgrade actions.
const (
	// UpgradeSkip: the agent already runs the target version.
	UpgradeSkip UpgradeAction = "skip"
	// UpgradeInstall: upload, rename over the binary, restart.
	UpgradeInstall UpgradeAction = "install"
	// UpgradeRestart: the binary is in place but the agent runs another
	// version (a run stopped after the rename), or it runs the target
	// version under a herd.service this herdctl renders otherwise: restart
	// only.
	UpgradeRestart UpgradeAction = "restart"
)

// UpgradeCheck is what Decide weighs for one board.
type UpgradeCheck struct {
	// Running is the version the board's agent reports ("" when it does
	// not answer), RunningFormat its state format (0: not reported).
	Running       string
	RunningFormat int
	// ClusterFormat is the state format the cluster's leader reports (0:
	// not reported).
	ClusterFormat int
	// Next is the new binary, as `herd version -o json` on the board
	// reports it.
	Next api.VersionInfo
	// Installed says BinaryPath already holds the new binary.
	Installed bool
	// UnitChanged says the board's herd.service is not the one this
	// herdctl renders (RenderUnit): it is rewritten before the restart.
	UnitChanged bool
}

// Decide says what to do with a board, and why in words; an error (ErrDowngrade)
// refuses the new binary: its state format is older than the one the
// board or the cluster runs, so it could not read their snapshots.
func Decide(c UpgradeCheck) (UpgradeAction, string, error) {
	have := max(EffectiveStateFormat(c.ClusterFormat), EffectiveStateFormat(c.RunningFormat))
	if c.Running == "" {
		have = EffectiveStateFormat(c.ClusterFormat)
	}
	next := EffectiveStateFormat(c.Next.StateFormat)
	if next < have {
		return "", "", fmt.Errorf("%w: herd %s reads state format %d, the cluster runs format %d (herd %s): it could not read the cluster's state; upgrade to a herd of state format %d or later",
			ErrDowngrade, c.Next.Version, next, have, orUnknown(c.Running), have)
	}
	if c.Running == c.Next.Version {
		if c.UnitChanged {
			return UpgradeRestart, "already on " + c.Next.Version + ", but herd.service changed: restarting", nil
		}
		return UpgradeSkip, "already on " + c.Next.Version, nil
	}
	why := fmt.Sprintf("%s → %s", orUnknown(c.Running), c.Next.Version)
	if cmp, ok := CompareVersions(c.Running, c.Next.Version); ok && cmp > 0 {
		why += fmt.Sprintf(" (a downgrade, same state format %d)", next)
	}
	if next > have {
		why += fmt.Sprintf(" (state format %d → %d)", have, next)
	}
	if c.Installed {
		return UpgradeRestart, why + ": binary in place, restarting", nil
	}
	return UpgradeInstall, why, nil
}

func orUnknown(v string) string {
	if v == "" {
		return "(agent not answering)"
	}
	return v
}

// UpgradeOrder is the order Upgrade visits boards in: workers first, then
// servers other than leader, the leader last, each group in the order
// given (boards.toml's).
func UpgradeOrder(boards []StateBoard, leader string) []StateBoard {
	var workers, servers, last []StateBoard
	for _, b := range boards {
		switch {
		case b.Server && b.Name == leader:
			last = append(last, b)
		case b.Server:
			servers = append(servers, b)
		default:
			workers = append(workers, b)
		}
	}
	return slices.Concat(workers, servers, last)
}

// GateInput is what the gate after restarting one board looks at.
type GateInput struct {
	// Board is the restarted board; Want the version it must run.
	Board StateBoard
	Want  string
	// Self is the board's own agent's status (GET /v1/status on the
	// board), SelfErr why it could not be had.
	Self    api.ClusterStatus
	SelfErr error
	// Cluster is the cluster's status as the servers answer it (through
	// any of them), ClusterErr why it could not be had.
	Cluster    api.ClusterStatus
	ClusterErr error
	// CommitAtRestart is the leader's commit index just before the
	// restart: a server must have applied that much.
	CommitAtRestart uint64
}

// Gate says whether the next board may be restarted after g.Board was:
// its agent answers with the new version, it is an alive gossip member,
// the cluster has a leader, and a server has applied everything the
// leader had committed when it was restarted and sees that leader. When
// not, it says what is missing.
func Gate(g GateInput) (bool, string) {
	var missing []string
	switch {
	case g.SelfErr != nil:
		missing = append(missing, fmt.Sprintf("agent not answering (%v)", g.SelfErr))
	case g.Self.Version != g.Want:
		missing = append(missing, fmt.Sprintf("agent runs %s, want %s", orUnknown(g.Self.Version), g.Want))
	case g.Board.Server && g.Self.AppliedIndex < g.CommitAtRestart:
		missing = append(missing, fmt.Sprintf("raft applied index %d of %d", g.Self.AppliedIndex, g.CommitAtRestart))
	case g.Board.Server && g.Self.Leader == "":
		missing = append(missing, "the board sees no leader")
	}
	if g.ClusterErr != nil {
		missing = append(missing, fmt.Sprintf("cluster status: %v", g.ClusterErr))
	} else {
		if g.Cluster.Leader == "" {
			missing = append(missing, "no leader")
		}
		if !g.Cluster.Alive(g.Board.Name) {
			missing = append(missing, "not alive in gossip")
		}
	}
	return len(missing) == 0, strings.Join(missing, "; ")
}

// UpgradeOptions configure Upgrade (with Options for reaching boards and
// the binaries).
type UpgradeOptions struct {
	// Status asks the cluster for its status through any server.
	// Required.
	Status func(ctx context.Context) (api.ClusterStatus, error)
	// BoardStatus asks one board's own agent for its status. Required.
	BoardStatus func(ctx context.Context, b StateBoard) (api.ClusterStatus, error)
	// DryRun only reports the order.
	DryRun bool
	// GateTimeout bounds waiting for one board to come back (default
	// 2m); GateInterval is how often the gate looks (default 250ms).
	GateTimeout, GateInterval time.Duration
	// RestartWait bounds waiting for the agent to exit on RestartSignal
	// before it is killed (default DefaultRestartWait).
	RestartWait time.Duration
}

// UpgradeBoard is what Upgrade did with one board.
type UpgradeBoard struct {
	Board  StateBoard
	Action UpgradeAction
	// From and To are the versions before and after.
	From, To string
	// Took is the time from the restart until the gate opened.
	Took time.Duration
	Err  error
}

// UpgradeResult is what Upgrade did, in the order it did it.
type UpgradeResult struct {
	Boards []UpgradeBoard
}

// Upgrade rolls the herd binary of o.Binaries onto every recorded board
// (o.Boards is ignored), one board at a time in UpgradeOrder: the new
// binary is uploaded beside the old one (NewBinaryPath), asked its version
// and state format on the board, refused if it is a downgrade across a
// state format change, renamed over BinaryPath and herd.service
// restarted; the next board waits for Gate. A board already running the
// target version is skipped. The leader is restarted last: its agent
// hands leadership to another voter when it stops (SIGTERM). Upgrade
// stops at the first board that fails, with the boards done so far in
// the result.
func Upgrade(ctx context.Context, o Options, uo UpgradeOptions) (*UpgradeResult, error) {
	if uo.Status == nil || uo.BoardStatus == nil {
		return nil, fmt.Errorf("%w: Status and BoardStatus are required", ErrUpgrade)
	}
	if o.Auth == nil {
		return nil, errors.New("bootstrap: Auth is nil")
	}
	if err := o.Binaries.Validate(); err != nil {
		return nil, err
	}
	if uo.GateTimeout <= 0 {
		uo.GateTimeout = 2 * time.Minute
	}
	if uo.GateInterval <= 0 {
		uo.GateInterval = 250 * time.Millisecond
	}
	if uo.RestartWait <= 0 {
		uo.RestartWait = DefaultRestartWait
	}
	progress := o.Progress
	if progress == nil {
		progress = func(string, string) {}
	}
	st, _, err := LoadState(o.StateDir, o.Cluster, false)
	if err != nil {
		return nil, err
	}
	if len(st.Boards) == 0 {
		return nil, fmt.Errorf("%w: cluster %q has no boards recorded in %s", ErrUpgrade, o.Cluster, o.StateDir)
	}
	cst, err := uo.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: cluster status: %v", ErrUpgrade, err)
	}
	if cst.Leader == "" {
		return nil, fmt.Errorf("%w: the cluster has no leader: fix it before upgrading", ErrUpgrade)
	}
	order := UpgradeOrder(st.Boards, cst.Leader)
	res := &UpgradeResult{}
	if uo.DryRun {
		for i, b := range order {
			progress(b.Name, fmt.Sprintf("[%d/%d] %s", i+1, len(order), roleOf(b, cst.Leader)))
			res.Boards = append(res.Boards, UpgradeBoard{Board: b})
		}
		return res, nil
	}
	bins := &binaryCache{files: map[string]binaryEntry{}}
	done := map[string]bool{}
	for i := 0; i < len(order); i++ {
		if i > 0 && order[i].Server {
			// The leader may have moved: keep whoever leads now for last.
			if cur, err := uo.Status(ctx); err == nil && cur.Leader != "" {
				cst = cur
				var rest []StateBoard
				for _, b := range order[i:] {
					if !done[b.Name] {
						rest = append(rest, b)
					}
				}
				order = append(order[:i:i], UpgradeOrder(rest, cur.Leader)...)
			}
		}
		sb := order[i]
		label := fmt.Sprintf("[%d/%d] %s (%s)", i+1, len(order), sb.Name, roleOf(sb, cst.Leader))
		say := func(msg string) { progress(label, msg) }
		ub := o.upgradeBoard(ctx, uo, st, sb, cst, bins, say)
		res.Boards = append(res.Boards, ub)
		done[sb.Name] = true
		if ub.Err != nil {
			say("failed: " + ub.Err.Error())
			return res, fmt.Errorf("%w: %s: %v (the boards after it were not touched; run upgrade again to go on)", ErrUpgrade, sb.Name, ub.Err)
		}
	}
	return res, nil
}

func roleOf(b StateBoard, leader string) string {
	switch {
	case b.Server && b.Name == leader:
		return "server, leader"
	case b.Server:
		return "server"
	}
	return "worker"
}

// upgradeBoard upgrades one board and waits for its gate.
func (o Options) upgradeBoard(ctx context.Context, uo UpgradeOptions, st *State, sb StateBoard, cst api.ClusterStatus, bins *binaryCache, say func(string)) UpgradeBoard {
	ub := UpgradeBoard{Board: sb}
	fail := func(err error) UpgradeBoard { ub.Err = err; return ub }
	t, err := o.SSHConfig.Resolve(sb.BoardArg())
	if err != nil {
		return fail(err)
	}
	b := &board{res: &BoardResult{Target: t, Label: boardLabel(t), Name: sb.Name, Server: sb.Server}}
	defer func() {
		if b.close != nil {
			b.close()
		}
	}()
	if err := o.probe(ctx, b, say); err != nil {
		return fail(err)
	}
	node, r, root := b.res.Label, b.remote, b.root
	bin, err := bins.get(o.Binaries, b.probe.Arch)
	if err != nil {
		return fail(err)
	}
	self, selfErr := uo.BoardStatus(ctx, sb)
	if selfErr == nil {
		ub.From = self.Version
	}
	out, err := runTolerant(ctx, r, node, []string{"sha256sum", root + BinaryPath, root + SudoersPath, root + UnitPath})
	if err != nil {
		return fail(err)
	}
	sums := ParseSums(out, root)
	if err := refreshSudoers(ctx, r, node, root, sums, say); err != nil {
		return fail(err)
	}
	have, installed := sums[BinaryPath]
	installed = installed && have == bin.Sum
	unit := NewFile(UnitPath, RenderUnit(), 0o644)
	unitHave, ok := sums[UnitPath]
	unitChanged := ok && unitHave != unit.Sum
	candidate := NewBinaryPath
	if installed {
		candidate = BinaryPath
	} else {
		say(fmt.Sprintf("uploading herd (%s) to %s", humanSize(len(bin.Content)), NewBinaryPath))
		if err := r.PutFile(ctx, node, root+NewBinaryPath, bin.Content, 0o755, sshexec.PutFileOptions{MkdirAll: true}); err != nil {
			return fail(err)
		}
	}
	next, err := boardVersion(ctx, r, node, root+candidate)
	if err != nil {
		return fail(err)
	}
	ub.To = next.Version
	action, why, err := Decide(UpgradeCheck{Running: ub.From, RunningFormat: self.StateFormat, ClusterFormat: cst.StateFormat, Next: next, Installed: installed, UnitChanged: unitChanged})
	ub.Action = action
	if err != nil || action == UpgradeSkip {
		if !installed {
			removeQuiet(ctx, r, node, root+NewBinaryPath)
		}
		if err != nil {
			return fail(err)
		}
		say(why + ": skipped")
		return ub
	}
	say(why)

	var commit uint64
	if sb.Server {
		commit = leaderCommit(ctx, uo, st, self)
	}
	if !installed {
		if err := runOK(ctx, r, node, []string{"mv", "-f", "--", root + NewBinaryPath, root + BinaryPath}); err != nil {
			return fail(err)
		}
	}
	if unitChanged {
		say("rewriting " + UnitPath + " (its settings changed)")
		if err := r.PutFile(ctx, node, root+UnitPath, unit.Content, unit.Mode); err != nil {
			return fail(err)
		}
		if err := runOK(ctx, r, node, []string{"systemctl", "daemon-reload"}); err != nil {
			return fail(err)
		}
	}
	start := time.Now()
	if err := restartAgent(ctx, r, node, uo.RestartWait, say); err != nil {
		return fail(err)
	}
	took, err := waitGate(ctx, uo, sb, next.Version, commit, start, say)
	if err != nil {
		return fail(err)
	}
	ub.Took = took
	return ub
}

// refreshSudoers rewrites the executor account's sudoers drop-in when the
// board has one (it was bootstrapped with the account) that is not what
// this herdctl renders: a drop-in from an older bootstrap lacks the board
// session's line, and without it the leader drives that board with a
// process chain per command. sums are the board's file sums.
func refreshSudoers(ctx context.Context, r Remote, node, root string, sums map[string][32]byte, say func(string)) error {
	have, ok := sums[SudoersPath]
	want := NewFile(SudoersPath, RenderSudoers(), 0o440)
	if !ok || have == want.Sum {
		return nil
	}
	say("rewriting " + SudoersPath + " (the executor account's commands changed)")
	return putSudoers(ctx, r, node, root, want)
}

// waitGate waits, up to uo.GateTimeout, for the board sb restarted at
// start to pass its gate on version want, and returns how long after the
// restart it did.
func waitGate(ctx context.Context, uo UpgradeOptions, sb StateBoard, want string, commit uint64, start time.Time, say func(string)) (time.Duration, error) {
	gctx, cancel := context.WithTimeout(ctx, uo.GateTimeout)
	defer cancel()
	last := ""
	tick := time.NewTicker(uo.GateInterval)
	defer tick.Stop()
	for {
		g := GateInput{Board: sb, Want: want, CommitAtRestart: commit}
		g.Self, g.SelfErr = uo.BoardStatus(gctx, sb)
		g.Cluster, g.ClusterErr = uo.Status(gctx)
		ok, missing := Gate(g)
		if ok {
			took := time.Since(start)
			say(fmt.Sprintf("ok: on %s, back in gossip, leader %s, %.1fs after the restart", want, g.Cluster.Leader, took.Seconds()))
			return took, nil
		}
		if missing != last {
			last = missing
			say("waiting: " + missing)
		}
		select {
		case <-gctx.Done():
			if ctx.Err() != nil {
				return 0, ctx.Err()
			}
			return 0, fmt.Errorf("not back within %v after the restart: %s", uo.GateTimeout, last)
		case <-tick.C:
		}
	}
}

// restartAgent restarts herd.service without the agent leaving the
// cluster: RestartSignal to its main process, which exits for systemd to
// start it again; SIGKILL if it is still the same process after
// wait (an agent older than RestartSignal ignores it); a plain restart
// when the service does not run.
func restartAgent(ctx context.Context, r Remote, node string, wait time.Duration, say func(string)) error {
	pid, err := mainPID(ctx, r, node)
	if err != nil {
		return err
	}
	if pid == "0" {
		say("systemctl restart " + UnitName + " (it was not running)")
		return runOK(ctx, r, node, []string{"systemctl", "restart", UnitName})
	}
	for _, sig := range []string{RestartSignal, "SIGKILL"} {
		say(fmt.Sprintf("restarting the agent (systemctl kill -s %s, MainPID %s)", sig, pid))
		if err := runOK(ctx, r, node, []string{"systemctl", "kill", "--kill-whom=main", "-s", sig, UnitName}); err != nil {
			return err
		}
		deadline := time.Now().Add(wait)
		for time.Now().Before(deadline) {
			now, err := mainPID(ctx, r, node)
			if err != nil {
				return err
			}
			if now != pid {
				return nil
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
		say(fmt.Sprintf("the agent is still MainPID %s %v after %s (a herd older than %s ignores it)", pid, wait, sig, RestartSignal))
	}
	return fmt.Errorf("bootstrap: %s: herd.service kept MainPID %s after %s and SIGKILL", node, pid, RestartSignal)
}

// mainPID is herd.service's MainPID ("0" when it does not run).
func mainPID(ctx context.Context, r Remote, node string) (string, error) {
	res, err := r.Run(ctx, node, []string{"systemctl", "show", "-p", "MainPID", "--value", UnitName})
	if err != nil {
		return "", err
	}
	if res.ExitStatus != 0 {
		return "", fmt.Errorf("bootstrap: %s: systemctl show %s: exit status %d: %s", node, UnitName, res.ExitStatus, strings.TrimSpace(string(res.Stderr)))
	}
	return strings.TrimSpace(string(res.Stdout)), nil
}

// leaderCommit is the leader's commit index now: from the leader's own
// status, else the board's own view of it (never ahead of the leader's).
func leaderCommit(ctx context.Context, uo UpgradeOptions, st *State, self api.ClusterStatus) uint64 {
	if cst, err := uo.Status(ctx); err == nil && cst.Leader != "" {
		if cst.Node == cst.Leader {
			return cst.CommitIndex
		}
		for _, b := range st.Boards {
			if b.Name == cst.Leader {
				if ls, err := uo.BoardStatus(ctx, b); err == nil && ls.Node == cst.Leader {
					return ls.CommitIndex
				}
			}
		}
	}
	return self.CommitIndex
}

// boardVersion runs `BIN version -o json` on the board, falling back to
// `BIN version` for a herd older than -o json.
func boardVersion(ctx context.Context, r Remote, node, bin string) (api.VersionInfo, error) {
	res, err := r.Run(ctx, node, []string{bin, "version", "-o", "json"})
	if err != nil {
		return api.VersionInfo{}, err
	}
	if res.ExitStatus != 0 {
		if res, err = r.Run(ctx, node, []string{bin, "version"}); err != nil {
			return api.VersionInfo{}, err
		}
		if res.ExitStatus != 0 {
			return api.VersionInfo{}, fmt.Errorf("bootstrap: %s: %s version: exit status %d: %s (is it built for this board?)", node, bin, res.ExitStatus, strings.TrimSpace(string(res.Stderr)))
		}
	}
	v, err := ParseVersionOutput(res.Stdout)
	if err != nil {
		return v, fmt.Errorf("%s: %w", node, err)
	}
	return v, nil
}

// runOK runs argv and wants exit status 0.
func runOK(ctx context.Context, r Remote, node string, argv []string) error {
	res, err := r.Run(ctx, node, argv)
	if err != nil {
		return err
	}
	if res.ExitStatus != 0 {
		return fmt.Errorf("bootstrap: %s: %s: exit status %d: %s", node, strings.Join(argv, " "), res.ExitStatus, strings.TrimSpace(string(res.Stderr)))
	}
	return nil
}

// removeQuiet removes a file, ignoring failure (cleanup after a refusal).
func removeQuiet(ctx context.Context, r Remote, node, p string) {
	r.Run(ctx, node, []string{"rm", "-f", "--", p})
}
