package bootstrap

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/coreos/go-systemd/v22/unit"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/units/sshexec"
)

// The board's resolver: where systemd-resolved runs, bootstrap sends the
// herd. domain to the board's own agent (127.0.0.1, DNSPort) with a
// drop-in; elsewhere it says how to do it.
const (
	// ResolvedDropInPath is the systemd-resolved drop-in bootstrap writes
	// (RenderResolvedDropIn), root's, 0644.
	ResolvedDropInPath = "/etc/systemd/resolved.conf.d/herd.conf"
	// ResolvedUnit is systemd-resolved's service.
	ResolvedUnit = "systemd-resolved.service"
	// MinSystemdDNSPort is the first systemd whose resolved takes a port
	// in DNS= (ADDRESS:PORT).
	MinSystemdDNSPort = 246
)

const resolvedDropInHeader = `# herd: names under herd. are asked of the herd agent on this board
# (127.0.0.1, port %d); other names resolve as before.
# Written by herdctl bootstrap, removed by herdctl bootstrap --remove.
`

// RenderResolvedDropIn returns the systemd-resolved drop-in: the agent on
// loopback (DNSPort) as a DNS server, used only for the routing domain
// ~herd.
func RenderResolvedDropIn() []byte {
	o := unit.NewUnitOption
	b, _ := io.ReadAll(unit.Serialize([]*unit.UnitOption{
		o("Resolve", "DNS", "127.0.0.1:"+strconv.Itoa(DNSPort)),
		o("Resolve", "Domains", "~herd."),
	})) // a bytes.Buffer: no error
	return append(fmt.Appendf(nil, resolvedDropInHeader, DNSPort), b...)
}

// ResolvedDropIn is the drop-in as a File.
func ResolvedDropIn() File {
	return NewFile(ResolvedDropInPath, RenderResolvedDropIn(), 0o644)
}

// ResolverPlan is what bootstrap does about one board's resolver.
type ResolverPlan struct {
	// Write is the drop-in to write and why; nil when it is in place or
	// not wanted.
	Write *Change
	// Steps are the systemctl commands to run after writing.
	Steps [][]string
	// Note is the line to tell the user when bootstrap leaves the
	// resolver alone ("" otherwise).
	Note string
}

// PlanResolver decides about the resolver of a board: active says
// systemd-resolved runs there, systemd is the board's systemd version
// (Probe.Systemd) and have what the board holds (by path, as for
// FilesToWrite). With resolved running (and new enough for a port in
// DNS=) the drop-in is written when it is missing or differs, and resolved
// reloaded then; otherwise nothing is written and Note says how to point
// the board's resolver at the agent.
func PlanResolver(active bool, systemd string, have map[string]Observed) ResolverPlan {
	how := fmt.Sprintf("point its resolver at 127.0.0.1 port %d for herd. (dnsmasq: server=/herd/127.0.0.1#%d), or ask the agent directly: dig -p %d @127.0.0.1 NAME.svc.herd.", DNSPort, DNSPort, DNSPort)
	if !active {
		return ResolverPlan{Note: "systemd-resolved is not running: herd. names are not wired into this board's resolver; " + how}
	}
	if n, ok := api.SystemdMajor(systemd); !ok || n < MinSystemdDNSPort {
		return ResolverPlan{Note: fmt.Sprintf("systemd-resolved of systemd %s takes no port in DNS= (systemd %d does): herd. names are not wired into this board's resolver; %s", systemd, MinSystemdDNSPort, how)}
	}
	ch := FilesToWrite([]File{ResolvedDropIn()}, have)
	if len(ch) == 0 {
		return ResolverPlan{}
	}
	return ResolverPlan{Write: &ch[0], Steps: [][]string{{"systemctl", "reload-or-restart", ResolvedUnit}}}
}

// ResolverRemoveSteps are the systemctl commands after --remove took the
// drop-in away (removed): resolved reloaded if it runs (active), so that
// it forgets herd.; nothing otherwise (a stopped resolved is not
// started).
func ResolverRemoveSteps(removed, active bool) [][]string {
	if !removed || !active {
		return nil
	}
	return [][]string{{"systemctl", "reload-or-restart", ResolvedUnit}}
}

// wireResolver applies PlanResolver on the board, given what it holds
// (have), and returns the systemctl steps it ran.
func (b *board) wireResolver(ctx context.Context, have map[string]Observed, say func(string)) ([][]string, error) {
	node := b.res.Label
	rp := PlanResolver(b.probe.Resolved, b.probe.Systemd, have)
	if rp.Note != "" {
		say(rp.Note)
	}
	if c := rp.Write; c != nil {
		say(fmt.Sprintf("writing %s (%s): herd. names resolve through the agent", c.File.Path, c.Reason))
		if err := b.remote.PutFile(ctx, node, b.root+c.File.Path, c.File.Content, c.File.Mode, sshexec.PutFileOptions{MkdirAll: true}); err != nil {
			return nil, err
		}
		b.res.Written = append(b.res.Written, c.File.Path)
	}
	for _, s := range rp.Steps {
		say(strings.Join(s, " "))
		if err := runOK(ctx, b.remote, node, s); err != nil {
			return nil, err
		}
		b.res.Steps = append(b.res.Steps, s)
	}
	return rp.Steps, nil
}
