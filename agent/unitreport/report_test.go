package unitreport

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/crypto/ssh"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/internal/testutil"
	"github.com/herd-dev/herd/units"
)

func newSigner(t *testing.T) ssh.Signer { return testutil.SSHSigner(t) }

func keysOf(m map[string]ssh.Signer) KeyLookup {
	return func(node string) (ssh.PublicKey, error) {
		s, ok := m[node]
		if !ok {
			return nil, fmt.Errorf("node %s is not a gossip member", node)
		}
		return s.PublicKey(), nil
	}
}

func sample() Report {
	return Report{
		Node: "b4",
		Mark: Mark{Epoch: 1700000000, Seq: 7},
		Units: []units.UnitState{
			{Unit: "herd-web-abcde.service", LoadState: "loaded", ActiveState: "active", SubState: "running", MainPID: 42, NRestarts: 1},
			{Unit: "herd-db-1.service", LoadState: "loaded", ActiveState: "failed", SubState: "failed", ExecMainStatus: 3},
			{Unit: "herd-tick-fghij.service", LoadState: "loaded", ActiveState: "inactive", SubState: "dead", TimerActiveState: "active",
				Instances: []units.UnitState{
					{Unit: "herd-tick-fghij@509dc5d2fdb04954a6eaff4ef7fe0587.service", LoadState: "loaded", ActiveState: "active", SubState: "running"},
					{Unit: "herd-tick-fghij@5a13121516714748a0daf3013541d694.service", LoadState: "loaded", ActiveState: "active", SubState: "exited", Result: "success"},
				}},
		},
	}
}

func TestSignOpen(t *testing.T) {
	b4, b5 := newSigner(t), newSigner(t)
	lookup := keysOf(map[string]ssh.Signer{"b4": b4, "b5": b5})
	body, err := Sign(sample(), b4, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Open(body, lookup)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if diff := cmp.Diff(sample(), got); diff != "" {
		t.Errorf("Open (-want +got):\n%s", diff)
	}

	// Another board's key cannot speak for b4.
	forged, err := Sign(sample(), b5, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(forged, lookup); !errors.Is(err, ErrBadSignature) {
		t.Errorf("Open of a report b5 signed as b4: %v, want ErrBadSignature", err)
	}
	r := sample()
	r.Node = "b9"
	unknown, err := Sign(r, b4, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(unknown, lookup); !errors.Is(err, ErrUnknownKey) {
		t.Errorf("Open of a report from an unknown node: %v, want ErrUnknownKey", err)
	}
}

// TestOpenRefusesTampering changes the signed payload after signing.
func TestOpenRefusesTampering(t *testing.T) {
	b4 := newSigner(t)
	lookup := keysOf(map[string]ssh.Signer{"b4": b4})
	body, err := Sign(sample(), b4, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	var env envelope
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatal(err)
	}
	env.Payload = []byte(strings.Replace(string(env.Payload), `"ActiveState":"failed"`, `"ActiveState":"active"`, 1))
	tampered, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(tampered, lookup); !errors.Is(err, ErrBadSignature) {
		t.Errorf("Open of a tampered report: %v, want ErrBadSignature", err)
	}
	// A signature over the bare payload (without the context) is refused.
	sig, err := b4.Sign(rand.Reader, env.Payload)
	if err != nil {
		t.Fatal(err)
	}
	bare, _ := json.Marshal(envelope{Payload: env.Payload, Sig: sig})
	if _, err := Open(bare, lookup); !errors.Is(err, ErrBadSignature) {
		t.Errorf("Open of a signature without context: %v, want ErrBadSignature", err)
	}
}

func TestOpenRefusesMalformed(t *testing.T) {
	b4 := newSigner(t)
	lookup := keysOf(map[string]ssh.Signer{"b4": b4})
	signedPayload := func(payload string) []byte {
		sig, err := b4.Sign(rand.Reader, signed([]byte(payload)))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(envelope{Payload: []byte(payload), Sig: sig})
		return b
	}
	many := sample()
	many.Units = nil
	for i := range MaxUnits + 1 {
		many.Units = append(many.Units, units.UnitState{Unit: fmt.Sprintf("herd-p-%d.service", i)})
	}
	manyJSON, _ := json.Marshal(many)
	manyInstances := sample()
	manyInstances.Units = []units.UnitState{{Unit: "herd-a.service"}}
	for i := range api.MaxJobInstances + 1 {
		manyInstances.Units[0].Instances = append(manyInstances.Units[0].Instances, units.UnitState{Unit: api.InstanceUnitName("a", fmt.Sprint(i))})
	}
	manyInstancesJSON, _ := json.Marshal(manyInstances)
	tests := []struct {
		name string
		body []byte
		want string
	}{
		{"empty", nil, "malformed"},
		{"not json", []byte("\x00\x01"), "malformed"},
		{"unknown envelope field", []byte(`{"p":"e30=","s":null,"x":1}`), "unknown field"},
		{"no signature", []byte(`{"p":"e30="}`), "no payload or no signature"},
		{"trailing data", append(signedPayload(`{"node":"b4","mark":{"Epoch":1,"Seq":1},"units":[]}`), []byte(` {}`)...), "data after"},
		{"unknown payload field", signedPayload(`{"node":"b4","mark":{"Epoch":1,"Seq":1},"units":[],"evil":true}`), "unknown field"},
		{"zero mark", signedPayload(`{"node":"b4","mark":{"Epoch":0,"Seq":0},"units":[]}`), "must be positive"},
		{"bad node", signedPayload(`{"node":"B4;rm","mark":{"Epoch":1,"Seq":1},"units":[]}`), `node "B4;rm"`},
		{"foreign unit", signedPayload(`{"node":"b4","mark":{"Epoch":1,"Seq":1},"units":[{"Unit":"sshd.service"}]}`), "not a herd unit"},
		{"unit twice", signedPayload(`{"node":"b4","mark":{"Epoch":1,"Seq":1},"units":[{"Unit":"herd-a.service"},{"Unit":"herd-a.service"}]}`), "twice"},
		{"too many units", signedPayload(string(manyJSON)), "at most 256"},
		{"another pod's instance", signedPayload(`{"node":"b4","mark":{"Epoch":1,"Seq":1},"units":[{"Unit":"herd-a.service","Instances":[{"Unit":"herd-b@1.service"}]}]}`), "not an instance of herd-a@.service"},
		{"foreign instance", signedPayload(`{"node":"b4","mark":{"Epoch":1,"Seq":1},"units":[{"Unit":"herd-a.service","Instances":[{"Unit":"sshd.service"}]}]}`), "not an instance"},
		{"instance twice", signedPayload(`{"node":"b4","mark":{"Epoch":1,"Seq":1},"units":[{"Unit":"herd-a.service","Instances":[{"Unit":"herd-a@1.service"},{"Unit":"herd-a@1.service"}]}]}`), "twice"},
		{"nested instances", signedPayload(`{"node":"b4","mark":{"Epoch":1,"Seq":1},"units":[{"Unit":"herd-a.service","Instances":[{"Unit":"herd-a@1.service","Instances":[{"Unit":"herd-a@2.service"}]}]}]}`), "has no instances"},
		{"too many instances", signedPayload(string(manyInstancesJSON)), "at most 64"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Open(tc.body, lookup)
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("Open = %v, want ErrMalformed", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Open = %v, want it to mention %q", err, tc.want)
			}
		})
	}
	if _, err := Sign(many, b4, rand.Reader); !errors.Is(err, ErrMalformed) {
		t.Errorf("Sign of %d units = %v, want ErrMalformed", len(many.Units), err)
	}
}

func TestMarkOrder(t *testing.T) {
	tests := []struct {
		m, o Mark
		want bool
	}{
		{Mark{}, Mark{}, false},
		{Mark{}, Mark{1, 1}, false},
		{Mark{1, 1}, Mark{}, true},
		{Mark{1, 2}, Mark{1, 1}, true},
		{Mark{1, 1}, Mark{1, 1}, false},
		{Mark{1, 1}, Mark{1, 2}, false},
		{Mark{2, 1}, Mark{1, 9}, true},
		// An older epoch is never newer: a replayed report from before
		// the agent's last start changes nothing.
		{Mark{1, 9}, Mark{2, 1}, false},
	}
	for _, tc := range tests {
		if got := tc.m.After(tc.o); got != tc.want {
			t.Errorf("%v.After(%v) = %v, want %v", tc.m, tc.o, got, tc.want)
		}
	}
}

func TestSeqFile(t *testing.T) {
	m := Mark{Epoch: 1733400000, Seq: 12}
	got, err := ParseSeqFile(FormatSeqFile(m))
	if err != nil || got != m {
		t.Errorf("ParseSeqFile(FormatSeqFile(%v)) = %v, %v", m, got, err)
	}
	for _, bad := range []string{"", "1", "1 2 3", "0 1", "1 0", "-1 1", "x 1", strings.Repeat("1", 70) + " 1"} {
		if _, err := ParseSeqFile([]byte(bad)); !errors.Is(err, ErrBadSeqFile) {
			t.Errorf("ParseSeqFile(%q) = %v, want ErrBadSeqFile", bad, err)
		}
	}
}

func TestNextEpoch(t *testing.T) {
	tests := []struct{ last, now, want int64 }{
		{0, 1733400000, 1733400000},          // first start
		{1733400000, 1733400100, 1733400100}, // clock moved on
		{1733400000, 1733400000, 1733400001}, // same second
		{1733400000, 86400, 1733400001},      // no RTC: the clock went back
	}
	for _, tc := range tests {
		if got := NextEpoch(tc.last, tc.now); got != tc.want {
			t.Errorf("NextEpoch(%d, %d) = %d, want %d", tc.last, tc.now, got, tc.want)
		}
	}
}
