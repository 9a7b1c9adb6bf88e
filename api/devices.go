package api

import (
	"slices"
	"sort"
	"strings"
)

// DeviceDir is where every device a template asks for lives.
const DeviceDir = "/dev/"

// MaxDevices is the most devices one template may ask for.
const MaxDevices = 16

// DeviceClass is a kind of device node a board advertises (in
// BoardFacts.Devices) and a template may ask for: the nodes named Prefix
// followed by a number (gpiochip0, i2c-1), or for spidev a bus and a chip
// select (spidev0.1).
type DeviceClass struct {
	// Prefix is the node name without its number ("ttyUSB").
	Prefix string
	// Code is the class's one-letter code in gossip's compact form.
	// Codes are never reused.
	Code byte
	// Dotted is true when the number is bus.chip (spidev0.1).
	Dotted bool
}

// DeviceClasses are the device nodes herd knows: boards advertise the ones
// they have, templates may ask only for these (a node no board can
// advertise would leave a pod pending forever). Order is the order
// BoardFacts.Devices lists them in.
var DeviceClasses = []DeviceClass{
	{Prefix: "gpiochip", Code: 'g'},             // GPIO controllers (libgpiod)
	{Prefix: "i2c-", Code: 'i'},                 // I²C buses
	{Prefix: "spidev", Code: 's', Dotted: true}, // SPI devices, bus.chip-select
	{Prefix: "ttyUSB", Code: 'u'},               // USB serial adapters
	{Prefix: "ttyACM", Code: 'a'},               // USB CDC-ACM devices (Arduino, modems)
	{Prefix: "ttyAMA", Code: 'm'},               // PL011 UARTs (the Pi's GPIO header serial)
	{Prefix: "video", Code: 'v'},                // V4L2 devices (cameras, codecs)
}

// maxDeviceNumber bounds the digits of a device number.
const maxDeviceNumber = 4

// DeviceNode splits a device node name (the part after /dev/, "i2c-1") into
// its class and number ("1", or "0.1" for spidev0.1). ok is false for a
// name that is not a node of a known class.
func DeviceNode(name string) (class DeviceClass, num string, ok bool) {
	for _, c := range DeviceClasses {
		rest, found := strings.CutPrefix(name, c.Prefix)
		if !found {
			continue
		}
		if c.Dotted {
			bus, cs, dot := strings.Cut(rest, ".")
			if dot && isDeviceNumber(bus) && isDeviceNumber(cs) {
				return c, rest, true
			}
		} else if isDeviceNumber(rest) {
			return c, rest, true
		}
	}
	return DeviceClass{}, "", false
}

// isDeviceNumber: 1 to maxDeviceNumber decimal digits, without a leading
// zero unless it is 0 (the kernel never names a node "i2c-01").
func isDeviceNumber(s string) bool {
	if s == "" || len(s) > maxDeviceNumber || (len(s) > 1 && s[0] == '0') {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// deviceClassList names the classes for error messages:
// "gpiochipN, i2c-N, spidevN.M, ...".
func deviceClassList() string {
	names := make([]string, len(DeviceClasses))
	for i, c := range DeviceClasses {
		names[i] = c.Prefix + "N"
		if c.Dotted {
			names[i] += ".M"
		}
	}
	return strings.Join(names, ", ")
}

// SortDevices sorts device node names (without /dev/) in the order of
// DeviceClasses, then by number, and drops duplicates and names of no
// known class.
func SortDevices(names []string) []string {
	type node struct {
		class int
		num   []int
		name  string
	}
	var nodes []node
	for _, n := range names {
		c, num, ok := DeviceNode(n)
		if !ok {
			continue
		}
		nd := node{class: slices.IndexFunc(DeviceClasses, func(d DeviceClass) bool { return d.Prefix == c.Prefix }), name: n}
		for _, part := range strings.Split(num, ".") {
			v := 0
			for i := 0; i < len(part); i++ {
				v = v*10 + int(part[i]-'0')
			}
			nd.num = append(nd.num, v)
		}
		nodes = append(nodes, nd)
	}
	sort.Slice(nodes, func(i, j int) bool {
		a, b := &nodes[i], &nodes[j]
		if a.class != b.class {
			return a.class < b.class
		}
		return slices.Compare(a.num, b.num) < 0
	})
	out := make([]string, 0, len(nodes))
	for _, nd := range nodes {
		if len(out) == 0 || out[len(out)-1] != nd.name {
			out = append(out, nd.name)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// HasDevice reports whether the board advertises the device at path
// ("/dev/i2c-1").
func (f *BoardFacts) HasDevice(path string) bool {
	name, ok := strings.CutPrefix(path, DeviceDir)
	return ok && slices.Contains(f.Devices, name)
}

// MissingDevice returns the first device of devices (paths, as a template
// has them) the board does not advertise, as the scheduler's reason for
// passing it over ("missing device /dev/i2c-1"), or "" when it has them
// all. The reason names only the device, so that boards missing the same
// one count together in the scheduler's summary.
func (f *BoardFacts) MissingDevice(devices []string) string {
	for _, d := range devices {
		if !f.HasDevice(d) {
			return "missing device " + d
		}
	}
	return ""
}

// devices checks a template's device list: at most MaxDevices paths, each
// DeviceDir followed by a node of a known class (which also makes it
// absolute, clean and free of "..", spaces and specifiers), none twice.
func (v *validator) devices(p fieldPath, devices []string) {
	if len(devices) > MaxDevices {
		v.addf(p, "%d devices; a template may ask for at most %d", len(devices), MaxDevices)
		return
	}
	seen := make(map[string]int, len(devices))
	for i, d := range devices {
		ip := p.index(i)
		name, under := strings.CutPrefix(d, DeviceDir)
		switch {
		case d == "":
			v.addf(ip, "must not be empty: a device node such as \"/dev/i2c-1\"")
			continue
		case !v.absPath(ip, d):
			continue
		case !under || name == "":
			v.addf(ip, "%q: must be a device node under %s", d, DeviceDir)
			continue
		}
		if _, _, ok := DeviceNode(name); !ok {
			v.addf(ip, "%q: not a device herd knows; boards advertise only %s under %s", d, deviceClassList(), DeviceDir)
			continue
		}
		if j, dup := seen[d]; dup {
			v.addf(ip, "duplicate device %q (also devices[%d])", d, j)
			continue
		}
		seen[d] = i
	}
}
