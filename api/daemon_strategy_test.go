package api

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDaemonStrategyManifest(t *testing.T) {
	const src = `[[daemon]]
name = "exporter"
[daemon.strategy]
max_unavailable = 2
[daemon.template]
exec = ["/usr/bin/prometheus-node-exporter"]
`
	objs, err := DecodeManifest("d.toml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	d := objs[0].(*Daemon)
	if m := d.Spec.Strategy.MaxUnavailable; m == nil || *m != 2 {
		t.Fatalf("max_unavailable = %v, want 2", m)
	}
	out, err := EncodeManifest(objs)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "[daemon.strategy]\nmax_unavailable = 2\n") {
		t.Errorf("encoded manifest lacks the strategy:\n%s", out)
	}
	again, err := DecodeManifest("encoded.toml", out)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(objs, again); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}

	// Left out: nil, and SetDefaults leaves it nil (a daemon stored before
	// the field keeps its spec).
	plain, err := DecodeManifest("d.toml", []byte(strings.Replace(src, "[daemon.strategy]\nmax_unavailable = 2\n", "", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if m := plain[0].(*Daemon).Spec.Strategy.MaxUnavailable; m != nil {
		t.Errorf("max_unavailable left out = %d, want nil (default %d applied by the controller)", *m, DefaultDaemonMaxUnavailable)
	}

	for _, bad := range []string{"0", "-1", "1001"} {
		_, err := DecodeManifest("d.toml", []byte(strings.Replace(src, "max_unavailable = 2", "max_unavailable = "+bad, 1)))
		if err == nil || !strings.Contains(err.Error(), "strategy.max_unavailable") || !strings.Contains(err.Error(), "between 1 and") {
			t.Errorf("max_unavailable = %s: err = %v, want a strategy.max_unavailable range error", bad, err)
		}
	}
}
