package api

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMatchLabels(t *testing.T) {
	labels := map[string]string{"app": "web", "tier": "front", "empty": ""}
	tests := []struct {
		name string
		sel  map[string]string
		want bool
	}{
		{"nil selector matches nothing", nil, false},
		{"empty selector matches nothing", map[string]string{}, false},
		{"one key", map[string]string{"app": "web"}, true},
		{"all keys", map[string]string{"app": "web", "tier": "front"}, true},
		{"wrong value", map[string]string{"app": "api"}, false},
		{"missing key", map[string]string{"app": "web", "zone": "a"}, false},
		{"empty value must be present", map[string]string{"empty": ""}, true},
		{"empty value of absent key", map[string]string{"absent": ""}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := MatchLabels(tt.sel, labels); got != tt.want {
				t.Errorf("MatchLabels(%v) = %v, want %v", tt.sel, got, tt.want)
			}
		})
	}
}

func TestMatchesNodeSelector(t *testing.T) {
	node := &Node{
		Metadata: ObjectMeta{Name: "b1", Labels: map[string]string{"zone": "a", LabelArch: "forged"}},
		Status:   NodeStatus{BoardFacts: BoardFacts{Arch: "arm64", Model: "rpi4"}},
	}
	bare := &Node{Metadata: ObjectMeta{Name: "b2"}}
	tests := []struct {
		node *Node
		sel  map[string]string
		want bool
	}{
		{node, nil, true},
		{node, map[string]string{}, true},
		{node, map[string]string{"arch": "arm64"}, true},
		{node, map[string]string{LabelArch: "arm64", "model": "rpi4"}, true},
		{node, map[string]string{LabelNode: "b1", "zone": "a"}, true},
		{node, map[string]string{"arch": "amd64"}, false},
		{node, map[string]string{LabelArch: "forged"}, false}, // facts win over user labels
		{node, map[string]string{"zone": "b"}, false},
		{node, map[string]string{"rack": ""}, false},
		{bare, map[string]string{"arch": ""}, false}, // unknown arch matches nothing
		{bare, map[string]string{LabelNode: "b1"}, false},
	}
	for _, tt := range tests {
		if got := tt.node.MatchesNodeSelector(tt.sel); got != tt.want {
			t.Errorf("%s.MatchesNodeSelector(%v) = %v, want %v", tt.node.Metadata.Name, tt.sel, got, tt.want)
		}
	}
}

func TestFormatAndParseSelector(t *testing.T) {
	m := map[string]string{"tier": "front", "app": "web", "herd.dev/arch": "arm64", "e": ""}
	s := FormatLabels(m)
	if want := "app=web,e=,herd.dev/arch=arm64,tier=front"; s != want {
		t.Errorf("FormatLabels = %q, want %q", s, want)
	}
	back, err := ParseSelector(s)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(m, back); diff != "" {
		t.Errorf("ParseSelector(FormatLabels(m)) (-want +got):\n%s", diff)
	}
	if FormatLabels(nil) != "" {
		t.Error("FormatLabels(nil) != \"\"")
	}
	got, err := ParseSelector(" app = web , tier==front")
	if err != nil || !cmp.Equal(got, map[string]string{"app": "web", "tier": "front"}) {
		t.Errorf("ParseSelector with blanks and == = %v, %v", got, err)
	}
}

func TestParseSelectorErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", "empty"},
		{"  ", "empty"},
		{"app", "want key=value"},
		{"app=web,", "want key=value"},
		{"=web", "key \"\""},
		{"a b=c", "key \"a b\""},
		{"app=a b", "value \"a b\""},
		{"app=a,app=b", "given twice"},
		{"app=a=b", "value \"a=b\""},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			_, err := ParseSelector(tt.in)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, ErrInvalidSelector) {
				t.Errorf("ParseSelector(%q) error = %v, want one containing %q", tt.in, err, tt.want)
			}
		})
	}
}

func TestSanitizeLabelValue(t *testing.T) {
	tests := map[string]string{
		"Raspberry Pi 4 Model B Rev 1.4": "Raspberry-Pi-4-Model-B-Rev-1.4",
		"  weird//chars!! ":              "weird-chars",
		"":                               "",
		strings.Repeat("x", 70):          strings.Repeat("x", 63),
		"ok_value-1.2":                   "ok_value-1.2",
		"-.-a-.-":                        "a",
	}
	for in, want := range tests {
		got := SanitizeLabelValue(in)
		if got != want {
			t.Errorf("SanitizeLabelValue(%q) = %q, want %q", in, got, want)
		}
		if err := ValidateLabelValue(got); err != nil {
			t.Errorf("SanitizeLabelValue(%q) = %q is not a valid value: %v", in, got, err)
		}
	}
}

func TestNameFromHost(t *testing.T) {
	tests := []struct {
		host, want string
		valid      bool
	}{
		{"raspberrypi", "raspberrypi", true},
		{"Pi-4.lan", "pi-4", true},
		{"b1.lab.example.", "b1", true},
		{"my_pi", "my_pi", false},
		{"-pi-", "pi", true},
		{"-", "", false},
		{"", "", false},
		{strings.Repeat("a", 64) + ".lan", strings.Repeat("a", 64), false},
	}
	for _, tt := range tests {
		got := NameFromHost(tt.host)
		if got != tt.want {
			t.Errorf("NameFromHost(%q) = %q, want %q", tt.host, got, tt.want)
		}
		if err := ValidateName(got); (err == nil) != tt.valid {
			t.Errorf("ValidateName(NameFromHost(%q)) = %v, want valid %v", tt.host, err, tt.valid)
		}
	}
}

func TestValidateNameAndLabels(t *testing.T) {
	for _, ok := range []string{"a", "web-1", "0", strings.Repeat("a", 63)} {
		if err := ValidateName(ok); err != nil {
			t.Errorf("ValidateName(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "A", "-a", "a-", "a_b", "a.b", "a b", "web;rm", "$(x)", strings.Repeat("a", 64)} {
		if err := ValidateName(bad); err == nil {
			t.Errorf("ValidateName(%q) = nil", bad)
		}
	}
	for _, ok := range []string{"app", "herd.dev/arch", "A.b_C-9", "x/y"} {
		if err := ValidateLabelKey(ok); err != nil {
			t.Errorf("ValidateLabelKey(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "/x", "x/", "a/b/c", ".x", "x.", "Herd.dev/x", "-a.b/x", "a b", strings.Repeat("k", 64)} {
		if err := ValidateLabelKey(bad); err == nil {
			t.Errorf("ValidateLabelKey(%q) = nil", bad)
		}
	}
	for _, bad := range []string{"a b", "a/b", "a=b", "a,b", strings.Repeat("v", 64)} {
		if err := ValidateLabelValue(bad); err == nil {
			t.Errorf("ValidateLabelValue(%q) = nil", bad)
		}
	}
}
