package api

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDeviceNode(t *testing.T) {
	for _, tt := range []struct {
		name   string
		prefix string // "" when not a known node
		num    string
	}{
		{"gpiochip0", "gpiochip", "0"},
		{"gpiochip512", "gpiochip", "512"},
		{"i2c-1", "i2c-", "1"},
		{"i2c-20", "i2c-", "20"},
		{"spidev0.1", "spidev", "0.1"},
		{"spidev10.0", "spidev", "10.0"},
		{"ttyUSB0", "ttyUSB", "0"},
		{"ttyACM3", "ttyACM", "3"},
		{"ttyAMA10", "ttyAMA", "10"},
		{"video31", "video", "31"},
		{"spidev0", "", ""},
		{"spidev0.", "", ""},
		{"spidev.0", "", ""},
		{"i2c-01", "", ""},
		{"i2c-", "", ""},
		{"i2c-1a", "", ""},
		{"gpiochip12345", "", ""},
		{"ttyUSB0 rw", "", ""},
		{"ttyS0", "", ""},
		{"sda", "", ""},
		{"mem", "", ""},
		{"gpiomem", "", ""},
		{"", "", ""},
		{"video0/x", "", ""},
	} {
		c, num, ok := DeviceNode(tt.name)
		if ok != (tt.prefix != "") || c.Prefix != tt.prefix || num != tt.num {
			t.Errorf("DeviceNode(%q) = %q, %q, %v; want %q, %q", tt.name, c.Prefix, num, ok, tt.prefix, tt.num)
		}
	}
}

func TestDeviceClassCodesUnique(t *testing.T) {
	seen := map[byte]string{}
	for _, c := range DeviceClasses {
		if o, dup := seen[c.Code]; dup {
			t.Errorf("code %q used by %s and %s", c.Code, o, c.Prefix)
		}
		seen[c.Code] = c.Prefix
	}
}

func TestSortDevices(t *testing.T) {
	for _, tt := range []struct {
		name     string
		in, want []string
	}{
		{"nil", nil, nil},
		{"unknown only", []string{"sda", "null"}, nil},
		{"class order then number", []string{"video10", "ttyUSB0", "i2c-10", "i2c-2", "gpiochip0", "spidev0.1", "spidev0.0", "video2"},
			[]string{"gpiochip0", "i2c-2", "i2c-10", "spidev0.0", "spidev0.1", "ttyUSB0", "video2", "video10"}},
		{"duplicates and strangers dropped", []string{"i2c-1", "tty0", "i2c-1"}, []string{"i2c-1"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, SortDevices(tt.in)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestMissingDevice(t *testing.T) {
	pi := BoardFacts{Devices: []string{"gpiochip0", "i2c-1", "ttyUSB0"}}
	for _, tt := range []struct {
		name    string
		facts   BoardFacts
		devices []string
		want    string
	}{
		{"none asked", BoardFacts{}, nil, ""},
		{"all there", pi, []string{"/dev/i2c-1", "/dev/gpiochip0"}, ""},
		{"one missing", pi, []string{"/dev/i2c-1", "/dev/spidev0.0"}, "missing device /dev/spidev0.0"},
		{"board without devices", BoardFacts{}, []string{"/dev/ttyUSB0"}, "missing device /dev/ttyUSB0"},
		{"path outside /dev", pi, []string{"i2c-1"}, "missing device i2c-1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.facts.MissingDevice(tt.devices); got != tt.want {
				t.Errorf("MissingDevice(%q) = %q, want %q", tt.devices, got, tt.want)
			}
		})
	}
}

// TestSpreadBoardsDevices: a rebalance spreads a device pod only over the
// boards that have its devices.
func TestSpreadBoardsDevices(t *testing.T) {
	node := func(name string, devs ...string) *Node {
		return &Node{Kind: KindNode, Metadata: ObjectMeta{Name: name},
			Status: NodeStatus{Phase: NodeReady, BoardFacts: BoardFacts{Devices: devs}}}
	}
	nodes := []*Node{node("a", "i2c-1"), node("b"), node("c", "gpiochip0", "i2c-1")}
	got := SpreadBoards(nodes, &PodTemplate{Devices: []string{"/dev/i2c-1"}})
	if diff := cmp.Diff([]string{"a", "c"}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
