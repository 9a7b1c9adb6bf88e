package gossip

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/herd-dev/herd/api"
)

const testHostKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOpKbGPinFIKvvVQexMuxfmVR3auvr57kkIe6mkURtIs"

func fullMeta() Meta {
	return Meta{
		RaftAddr: "192.168.1.10:7000",
		SSHAddr:  "192.168.1.10:22",
		HostKey:  testHostKey,
		BoardFacts: api.BoardFacts{
			Arch:              "arm64",
			Model:             "Raspberry Pi 4 Model B Rev 1.4",
			MemoryBytes:       8 << 30,
			CPUs:              4,
			ArchVariant:       "arm64",
			KernelArch:        "aarch64",
			Kernel:            "6.6.51+rpt-rpi-v8",
			Systemd:           "252.30",
			Cgroup:            "v2",
			CgroupControllers: []string{"cpu", "cpuset", "io", "pids"},
		},
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
		{"worker", Meta{SSHAddr: "[fe80::1]:22", BoardFacts: api.BoardFacts{Arch: "arm", CPUs: 1, MemoryBytes: 512 << 20}}},
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
	// A full server entry with board facts leaves about 40% of the
	// budget for labels.
	if len(b) > 300 {
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
		{"unknown controller", func(m *Meta) { m.CgroupControllers = []string{"freezer"} }, "Controllers"},
		{"empty controller", func(m *Meta) { m.CgroupControllers = []string{""} }, "Controllers"},
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

// TestMetaLongestRealistic measures the metadata of a server whose facts
// take the longest values real boards report (agent.FactsFrom clips longer
// ones), so that the budget left for labels is known and stays sizeable.
func TestMetaLongestRealistic(t *testing.T) {
	m := Meta{
		RaftAddr: "192.168.100.200:7000",
		SSHAddr:  "192.168.100.200:22",
		HostKey:  testHostKey,
		BoardFacts: api.BoardFacts{
			Arch:              "arm64",
			Model:             "Raspberry Pi Compute Module 4S Rev 1.0", // 48 bytes max after clipping
			MemoryBytes:       16 << 30,
			CPUs:              4,
			ArchVariant:       "arm64",
			KernelArch:        "aarch64",
			Kernel:            "6.12.25+rpt-rpi-2712", // 40 max after clipping
			Systemd:           "257.10",
			Cgroup:            "hybrid",
			CgroupControllers: []string{"cpu", "cpuset", "io", "memory", "pids"},
		},
		Version:         "v1.12.3-rc.1-4-gabcdef0",
		Server:          true,
		BootstrapExpect: 5,
	}
	b, err := EncodeMeta(m)
	if err != nil {
		t.Fatal(err)
	}
	left := MetaMaxSize - leavingOverhead - len(b)
	t.Logf("longest realistic meta without labels: %d bytes, %d left for labels: %s", len(b), left, b)
	if left < 160 {
		t.Errorf("only %d bytes left for labels (meta %d bytes): %s", left, len(b), b)
	}
	// Clipped maximums (48-byte model, 40-byte kernel, 16-byte systemd
	// and machine) still fit with no labels.
	m.Model, m.Kernel = strings.Repeat("M", 48), strings.Repeat("k", 40)
	m.Systemd, m.KernelArch = strings.Repeat("s", 16), strings.Repeat("a", 16)
	if b, err := EncodeMeta(m); err != nil {
		t.Errorf("clipped maximum facts: %v", err)
	} else {
		t.Logf("clipped maximum facts: %d bytes", len(b))
	}
}

// TestMetaMixedVersions: an agent that predates board facts decodes a new
// agent's metadata (unknown keys ignored) and a new agent decodes an old
// one's with the facts empty.
func TestMetaMixedVersions(t *testing.T) {
	b, err := EncodeMeta(fullMeta())
	if err != nil {
		t.Fatal(err)
	}
	var old struct {
		RaftAddr string `json:"r"`
		Arch     string `json:"a"`
		CPUs     int    `json:"c"`
	}
	if err := json.Unmarshal(b, &old); err != nil || old.RaftAddr != "192.168.1.10:7000" || old.Arch != "arm64" || old.CPUs != 4 {
		t.Errorf("old decoder: %+v, %v", old, err)
	}
	got, err := DecodeMeta([]byte(`{"r":"10.0.0.1:7000","a":"arm","c":1,"v":"v0.1.0","sv":true}`))
	if err != nil {
		t.Fatal(err)
	}
	want := Meta{RaftAddr: "10.0.0.1:7000", BoardFacts: api.BoardFacts{Arch: "arm", CPUs: 1}, Version: "v0.1.0", Server: true}
	// An old arm64 agent's variant and kernel machine follow from its Arch.
	got64, err := DecodeMeta([]byte(`{"a":"arm64"}`))
	if err != nil || got64.ArchVariant != "arm64" || got64.KernelArch != "aarch64" || got64.Kernel != "" {
		t.Errorf("old arm64 meta: %+v, %v", got64, err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("old meta (-want +got):\n%s", diff)
	}
	if got.CgroupControllers != nil {
		t.Errorf("Controllers = %#v, want nil", got.CgroupControllers)
	}
}

// TestMetaArmFactsTravel: a 32-bit ARM board's variant and kernel machine
// are not implied by its Arch and must survive the wire, as must every
// controller.
func TestMetaArmFactsTravel(t *testing.T) {
	for _, m := range []Meta{
		{BoardFacts: api.BoardFacts{Arch: "arm", ArchVariant: "armv6", KernelArch: "armv6l", Cgroup: "v2", CgroupControllers: []string{"cpu", "io", "pids"}}},
		{BoardFacts: api.BoardFacts{Arch: "arm", ArchVariant: "armv7", KernelArch: "aarch64", Cgroup: "hybrid", CgroupControllers: []string{"cpu", "cpuset", "io", "memory", "pids"}}},
		{BoardFacts: api.BoardFacts{Arch: "arm64", ArchVariant: "arm64", KernelArch: "aarch64", Cgroup: "none"}},
	} {
		b, err := EncodeMeta(m)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeMeta(b)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(m, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", b, diff)
		}
	}
	if got := decodeControllers("pmzc"); !cmp.Equal(got, []string{"cpu", "memory", "pids"}) {
		t.Errorf("decodeControllers skips unknown codes and sorts: got %v", got)
	}
}

// piDevices are a Raspberry Pi 4's device nodes with I²C, SPI and the
// serial port on, and its codec video nodes, as agent.FactsFrom sorts them.
var piDevices = []string{"gpiochip0", "gpiochip1", "i2c-1", "i2c-20", "i2c-21", "spidev0.0", "spidev0.1", "ttyUSB0", "ttyAMA0",
	"video10", "video11", "video12", "video13", "video14", "video15", "video16", "video18", "video19", "video20", "video21", "video22", "video23", "video31"}

func TestMetaDevices(t *testing.T) {
	for _, tt := range []struct {
		name    string
		devices []string
		wire    string
	}{
		{"none", nil, ""},
		{"gpio and i2c", []string{"gpiochip0", "i2c-1"}, "g0,i1"},
		{"every class", []string{"gpiochip0", "i2c-1", "spidev0.1", "ttyUSB0", "ttyACM12", "ttyAMA10", "video0"}, "g0,i1,s0.1,u0,a12,m10,v0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := fullMeta()
			m.Devices = tt.devices
			b, err := EncodeMeta(m)
			if err != nil {
				t.Fatal(err)
			}
			var w metaWire
			if err := json.Unmarshal(b, &w); err != nil {
				t.Fatal(err)
			}
			if w.Devices != tt.wire {
				t.Errorf("wire form %q, want %q", w.Devices, tt.wire)
			}
			got, err := DecodeMeta(b)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.devices, got.Devices); diff != "" {
				t.Errorf("round trip (-want +got):\n%s", diff)
			}
		})
	}
	// A newer agent's class this one does not know, and garbage, are
	// skipped; the rest comes back sorted.
	got, err := DecodeMeta([]byte(`{"dv":"u0,z3,g0,,i,i1x,g1"}`))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"gpiochip0", "gpiochip1", "ttyUSB0"}, got.Devices); diff != "" {
		t.Errorf("lenient decode (-want +got):\n%s", diff)
	}
	m := fullMeta()
	m.Devices = []string{"sda"}
	if _, err := EncodeMeta(m); !errors.Is(err, ErrMetaInvalid) || !strings.Contains(err.Error(), "Devices") {
		t.Errorf("unknown device: err = %v", err)
	}
}

// TestMetaDevicesSize measures what a Pi's devices cost next to the
// longest realistic facts (TestMetaLongestRealistic), and checks that
// TrimDevices keeps the ones that fit, in order, rather than failing.
func TestMetaDevicesSize(t *testing.T) {
	m := fullMeta()
	m.Labels = nil
	base, err := EncodeMeta(m)
	if err != nil {
		t.Fatal(err)
	}
	m.Devices = piDevices
	b, err := EncodeMeta(m)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("full meta without labels: %d bytes; with a Pi's %d devices: %d bytes (%d for devices), %d left",
		len(base), len(piDevices), len(b), len(b)-len(base), MetaMaxSize-leavingOverhead-len(b))

	for _, tt := range []struct {
		name      string
		labels    map[string]string
		keptAtMin int // at least this many devices are kept
		dropped   bool
	}{
		{"fits", nil, len(piDevices), false},
		{"labels crowd devices out", map[string]string{"zone": strings.Repeat("z", 60), "rack": strings.Repeat("r", 60)}, 1, true},
		{"no room for any", map[string]string{"zone": strings.Repeat("z", 150)}, 0, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := fullMeta()
			m.Labels, m.Devices = tt.labels, piDevices
			got, dropped := TrimDevices(m)
			if (len(dropped) > 0) != tt.dropped {
				t.Fatalf("dropped %v, want dropped=%v", dropped, tt.dropped)
			}
			if len(got.Devices) < tt.keptAtMin {
				t.Errorf("kept %d devices, want at least %d", len(got.Devices), tt.keptAtMin)
			}
			if diff := cmp.Diff(piDevices, append(slices.Clone(got.Devices), dropped...), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("kept+dropped is not the original order (-want +got):\n%s", diff)
			}
			if _, err := EncodeMeta(got); err != nil {
				t.Errorf("trimmed meta does not encode: %v", err)
			}
			if len(dropped) > 0 {
				one := got
				one.Devices = append(slices.Clone(got.Devices), dropped[0])
				if _, err := EncodeMeta(one); err == nil {
					t.Errorf("one more device would have fit: kept %d", len(got.Devices))
				}
			}
		})
	}
	// Too large without any device: unchanged, for EncodeMeta to report.
	m = fullMeta()
	m.Labels, m.Devices = map[string]string{"zone": strings.Repeat("z", 400)}, []string{"i2c-1"}
	if got, dropped := TrimDevices(m); dropped != nil || len(got.Devices) != 1 {
		t.Errorf("oversized labels: TrimDevices = %v, dropped %v", got.Devices, dropped)
	}
}
