package bootstrap

import (
	"crypto/sha256"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRenderResolvedDropIn(t *testing.T) {
	want := `# herd: names under herd. are asked of the herd agent on this board
# (127.0.0.1, port 8600); other names resolve as before.
# Written by herdctl bootstrap, removed by herdctl bootstrap --remove.
[Resolve]
DNS=127.0.0.1:8600
Domains=~herd.
`
	if diff := cmp.Diff(want, string(RenderResolvedDropIn())); diff != "" {
		t.Errorf("drop-in (-want +got):\n%s", diff)
	}
	f := ResolvedDropIn()
	if f.Path != "/etc/systemd/resolved.conf.d/herd.conf" || f.Mode != 0o644 || f.Sum != sha256.Sum256([]byte(want)) {
		t.Errorf("ResolvedDropIn() = %s %04o, want /etc/systemd/resolved.conf.d/herd.conf 0644 with the content above", f.Path, f.Mode)
	}
}

func TestPlanResolver(t *testing.T) {
	f := ResolvedDropIn()
	same := map[string]Observed{ResolvedDropInPath: {Sum: f.Sum, Mode: 0o644}}
	other := map[string]Observed{ResolvedDropInPath: {Sum: sha256.Sum256([]byte("[Resolve]\n")), Mode: 0o644}}
	loose := map[string]Observed{ResolvedDropInPath: {Sum: f.Sum, Mode: 0o666}}
	reload := [][]string{{"systemctl", "reload-or-restart", "systemd-resolved.service"}}
	how := "point its resolver at 127.0.0.1 port 8600 for herd. (dnsmasq: server=/herd/127.0.0.1#8600), or ask the agent directly: dig -p 8600 @127.0.0.1 NAME.svc.herd."
	tests := []struct {
		name    string
		active  bool
		systemd string
		have    map[string]Observed
		want    ResolverPlan
	}{
		{name: "running, no drop-in: write and reload", active: true, systemd: "252", have: nil,
			want: ResolverPlan{Write: &Change{f, "missing"}, Steps: reload}},
		{name: "running, drop-in in place: nothing", active: true, systemd: "252", have: same,
			want: ResolverPlan{}},
		{name: "running, drop-in differs: rewrite and reload", active: true, systemd: "252.22", have: other,
			want: ResolverPlan{Write: &Change{f, "content differs"}, Steps: reload}},
		{name: "running, drop-in mode differs: rewrite and reload", active: true, systemd: "247", have: loose,
			want: ResolverPlan{Write: &Change{f, "mode 0666, want 0644"}, Steps: reload}},
		{name: "running, first systemd with ports", active: true, systemd: "246", have: nil,
			want: ResolverPlan{Write: &Change{f, "missing"}, Steps: reload}},
		{name: "not running: a note only", active: false, systemd: "252", have: nil,
			want: ResolverPlan{Note: "systemd-resolved is not running: herd. names are not wired into this board's resolver; " + how}},
		{name: "not running, old drop-in kept: a note only", active: false, systemd: "252", have: other,
			want: ResolverPlan{Note: "systemd-resolved is not running: herd. names are not wired into this board's resolver; " + how}},
		{name: "running, systemd too old for a port: a note only", active: true, systemd: "241", have: nil,
			want: ResolverPlan{Note: "systemd-resolved of systemd 241 takes no port in DNS= (systemd 246 does): herd. names are not wired into this board's resolver; " + how}},
		{name: "running, unknown systemd version: a note only", active: true, systemd: "", have: nil,
			want: ResolverPlan{Note: "systemd-resolved of systemd  takes no port in DNS= (systemd 246 does): herd. names are not wired into this board's resolver; " + how}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, PlanResolver(tt.active, tt.systemd, tt.have)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestResolverRemoveSteps(t *testing.T) {
	reload := [][]string{{"systemctl", "reload-or-restart", "systemd-resolved.service"}}
	tests := []struct {
		name            string
		removed, active bool
		want            [][]string
	}{
		{"drop-in removed, resolved running: reload", true, true, reload},
		{"drop-in removed, resolved stopped: not started", true, false, nil},
		{"no drop-in, resolved running: nothing", false, true, nil},
		{"no drop-in, resolved stopped: nothing", false, false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, ResolverRemoveSteps(tt.removed, tt.active)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
