package gossip

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const testHostKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOpKbGPinFIKvvVQexMuxfmVR3auvr57kkIe6mkURtIs"

func fullMeta() Meta {
	return Meta{
		RaftAddr:        "192.168.1.10:7000",
		SSHAddr:         "192.168.1.10:22",
		HostKey:         testHostKey,
		Arch:            "arm64",
		Model:           "Raspberry Pi 4 Model B Rev 1.4",
		MemoryBytes:     8 << 30,
		CPUs:            4,
		Labels:          map[string]string{"zone": "shelf-1", "gpio": "yes"},
		Version:         "v0.1.0",
		Server:          true,
		BootstrapExpect: 3,
	}
}

func TestMetaRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		meta Meta
	}{
		{"zero", Meta{}},
		{"full", fullMeta()},
		{"worker", Meta{SSHAddr: "[fe80::1]:22", Arch: "arm", CPUs: 1, MemoryBytes: 512 << 20}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := EncodeMeta(tc.meta)
			if err != nil {
				t.Fatal(err)
			}
			if len(b) > MetaMaxSize {
				t.Fatalf("encoded %d bytes", len(b))
			}
			got, err := DecodeMeta(b)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.meta, got, cmpEmptyMaps); diff != "" {
				t.Errorf("round trip (-want +got):\n%s", diff)
			}
			again, _ := EncodeMeta(got)
			if string(again) != string(b) {
				t.Errorf("encoding not deterministic:\n%s\n%s", b, again)
			}
		})
	}
}

var cmpEmptyMaps = cmp.FilterValues(func(a, b map[string]string) bool { return len(a) == 0 && len(b) == 0 },
	cmp.Comparer(func(a, b map[string]string) bool { return true }))

func TestMetaIsCompact(t *testing.T) {
	m := fullMeta()
	m.Labels = nil
	b, err := EncodeMeta(m)
	if err != nil {
		t.Fatal(err)
	}
	// A full server entry leaves about half the budget for labels.
	if len(b) > 250 {
		t.Errorf("full meta without labels encodes to %d bytes: %s", len(b), b)
	}
}

func TestMetaHostKeyNormalised(t *testing.T) {
	m := fullMeta()
	m.HostKey = "  " + testHostKey + " root@raspberrypi\n"
	b, err := EncodeMeta(m)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeMeta(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.HostKey != testHostKey {
		t.Errorf("HostKey = %q, want %q (comment dropped)", got.HostKey, testHostKey)
	}
}

func TestMetaLeavingFlag(t *testing.T) {
	m := fullMeta()
	b, err := encodeMeta(m, true)
	if err != nil {
		t.Fatal(err)
	}
	got, leaving, err := decodeMeta(b)
	if err != nil || !leaving {
		t.Fatalf("decodeMeta = %v, %v", leaving, err)
	}
	if diff := cmp.Diff(m, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	plain, _ := EncodeMeta(m)
	if len(b)-len(plain) != leavingOverhead {
		t.Errorf("leaving flag costs %d bytes, reserved %d", len(b)-len(plain), leavingOverhead)
	}
}

func TestMetaTooLargeError(t *testing.T) {
	m := fullMeta()
	for i := range 30 {
		m.Labels[fmt.Sprintf("key%02d", i)] = "some-value"
	}
	_, err := EncodeMeta(m)
	if !errors.Is(err, ErrMetaTooLarge) {
		t.Fatalf("EncodeMeta = %v, want ErrMetaTooLarge", err)
	}
	for _, want := range []string{"512", "labels take", "fewer or shorter labels"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}

	// The limit is exact: grow one label byte by byte up to the edge.
	m = Meta{Labels: map[string]string{"k": ""}}
	for {
		b, err := EncodeMeta(m)
		if err != nil {
			if !errors.Is(err, ErrMetaTooLarge) {
				t.Fatal(err)
			}
			break
		}
		if len(b)+leavingOverhead > MetaMaxSize {
			t.Fatalf("accepted %d bytes", len(b))
		}
		m.Labels["k"] += "x"
	}
	if got := len(m.Labels["k"]); got < 400 {
		t.Errorf("rejected a %d-byte label, the limit is wasted", got)
	}
}

func TestMetaValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Meta)
		want string // substring of the error; "" means valid
	}{
		{"ok", func(*Meta) {}, ""},
		{"raft no port", func(m *Meta) { m.RaftAddr = "10.0.0.1" }, "RaftAddr"},
		{"raft bad port", func(m *Meta) { m.RaftAddr = "10.0.0.1:99999" }, "bad port"},
		{"server no raft", func(m *Meta) { m.RaftAddr = "" }, "RaftAddr is required"},
		{"ssh no host", func(m *Meta) { m.SSHAddr = ":22" }, "missing host"},
		{"host key garbage", func(m *Meta) { m.HostKey = "ssh-ed25519 notbase64!" }, "HostKey"},
		{"two host keys", func(m *Meta) { m.HostKey = testHostKey + "\n" + testHostKey }, "more than one key"},
		{"host key options", func(m *Meta) { m.HostKey = "no-pty " + testHostKey }, "options"},
		{"negative memory", func(m *Meta) { m.MemoryBytes = -1 }, "MemoryBytes"},
		{"negative cpus", func(m *Meta) { m.CPUs = -2 }, "CPUs"},
		{"negative expect", func(m *Meta) { m.BootstrapExpect = -1 }, "BootstrapExpect"},
		{"expect without server", func(m *Meta) { m.Server = false }, "Server is false"},
		{"empty label key", func(m *Meta) { m.Labels[""] = "x" }, "empty key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := fullMeta()
			tc.edit(&m)
			err := m.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate = %v", err)
				}
				return
			}
			if !errors.Is(err, ErrMetaInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v, want ErrMetaInvalid mentioning %q", err, tc.want)
			}
			if _, err := EncodeMeta(m); !errors.Is(err, ErrMetaInvalid) {
				t.Errorf("EncodeMeta = %v, want ErrMetaInvalid", err)
			}
		})
	}
}

func TestDecodeMetaGarbage(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
		want error
	}{
		{"nil", nil, ErrMetaInvalid},
		{"binary", []byte{0xff, 0x00, 0x13, 0x37}, ErrMetaInvalid},
		{"truncated", []byte(`{"r":"10.0.0.1:7000","l":{"a":`), ErrMetaInvalid},
		{"wrong types", []byte(`{"c":"four"}`), ErrMetaInvalid},
		{"array", []byte(`[1,2,3]`), ErrMetaInvalid},
		{"oversized", []byte(`{"m":"` + strings.Repeat("x", 600) + `"}`), ErrMetaTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := DecodeMeta(tc.in)
			if !errors.Is(err, tc.want) {
				t.Fatalf("DecodeMeta = %v, want %v", err, tc.want)
			}
			if diff := cmp.Diff(Meta{}, m); diff != "" {
				t.Errorf("meta not zero on error:\n%s", diff)
			}
		})
	}
	// Unknown keys from a newer agent are ignored.
	m, err := DecodeMeta([]byte(`{"a":"arm64","future":{"x":1}}`))
	if err != nil || m.Arch != "arm64" {
		t.Errorf("DecodeMeta with an unknown key = %+v, %v", m, err)
	}
}

func FuzzDecodeMeta(f *testing.F) {
	b, _ := EncodeMeta(fullMeta())
	f.Add(b)
	f.Add([]byte(`{"l":null}`))
	f.Add([]byte{0xff})
	f.Fuzz(func(t *testing.T, in []byte) {
		m, leaving, err := decodeMeta(in)
		if err != nil {
			return
		}
		// Whatever decodes must re-encode (when valid) and decode the same.
		if m.Validate() != nil {
			return
		}
		out, err := encodeMeta(m, leaving)
		if err != nil {
			return // may exceed the limit once re-encoded
		}
		again, leaving2, err := decodeMeta(out)
		if err != nil || leaving2 != leaving {
			t.Fatalf("re-decode: %v", err)
		}
		if diff := cmp.Diff(m, again, cmpEmptyMaps); diff != "" {
			t.Fatalf("(-first +second):\n%s", diff)
		}
	})
}
