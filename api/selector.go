package api

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Well-known node labels, set from gossip facts. In a node selector the
// shorthands "arch" and "model" stand for LabelArch and LabelModel;
// SetDefaults rewrites them to the long form.
const (
	LabelArch  = "herd.dev/arch"
	LabelModel = "herd.dev/model"
	LabelNode  = "herd.dev/node"
)

// nodeSelectorLongForm returns the well-known label a short node-selector
// key stands for.
func nodeSelectorLongForm(k string) (string, bool) {
	switch k {
	case "arch":
		return LabelArch, true
	case "model":
		return LabelModel, true
	}
	return "", false
}

// nodeSelectorShortKeys lists the keys nodeSelectorLongForm knows.
func nodeSelectorShortKeys() []string { return []string{"arch", "model"} }

// Limits on names and labels.
const (
	MaxNameLength        = 63
	MaxLabelNameLength   = 63
	MaxLabelPrefixLength = 253
	MaxLabelValueLength  = 63
)

// ErrInvalidSelector is wrapped by every error ParseSelector returns.
var ErrInvalidSelector = errors.New("api: invalid selector")

// MatchLabels reports whether every key=value of sel is in labels. An empty
// (or nil) selector matches nothing: a Deployment or Service must say what
// it selects, and an empty selector selecting every pod in the cluster would
// be a dangerous accident. Node selectors follow the opposite convention; see
// Node.MatchesNodeSelector.
func MatchLabels(sel, labels map[string]string) bool {
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		got, ok := labels[k]
		if !ok || got != v {
			return false
		}
	}
	return true
}

// Label looks up a node-selector key on node n. The well-known labels come
// from the node's name and gossip facts and cannot be overridden by user
// labels (LabelNode is the name, LabelArch and LabelModel the board's facts,
// present only when known); the shorthands "arch" and "model" stand for
// them, so stored specs from before SetDefaults still match. Any other key
// is a user label.
func (n *Node) Label(key string) (string, bool) {
	if long, ok := nodeSelectorLongForm(key); ok {
		key = long
	}
	switch key {
	case LabelNode:
		return n.Metadata.Name, true
	case LabelArch:
		return n.Status.Arch, n.Status.Arch != ""
	case LabelModel:
		return n.Status.Model, n.Status.Model != ""
	}
	v, ok := n.Metadata.Labels[key]
	return v, ok
}

// MatchesNodeSelector reports whether node n satisfies a pod template's
// node selector: every key, looked up with Label, has the selector's value.
// An empty node selector matches every node (unlike MatchLabels).
func (n *Node) MatchesNodeSelector(sel map[string]string) bool {
	for k, want := range sel {
		if got, ok := n.Label(k); !ok || got != want {
			return false
		}
	}
	return true
}

// FormatLabels renders labels as "a=b,c=d", sorted by key; "" when empty.
// ParseSelector reads it back.
func FormatLabels(labels map[string]string) string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(labels[k])
	}
	return b.String()
}

// ParseSelector parses "a=b,c=d" (as given to `herdctl get -l`) into a
// selector. Blanks around keys and values are ignored; keys and values must
// be valid label keys and values; a key may appear once. An empty string is
// an error, since an empty selector matches nothing. Every error wraps
// ErrInvalidSelector.
func ParseSelector(s string) (map[string]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("%w: empty; want key=value[,key=value...]", ErrInvalidSelector)
	}
	sel := make(map[string]string)
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			return nil, fmt.Errorf("%w: %q: want key=value", ErrInvalidSelector, strings.TrimSpace(part))
		}
		v = strings.TrimPrefix(v, "=") // accept a==b as well
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if msg := labelKeyProblem(k); msg != "" {
			return nil, fmt.Errorf("%w: key %q: %s", ErrInvalidSelector, k, msg)
		}
		if msg := labelValueProblem(v); msg != "" {
			return nil, fmt.Errorf("%w: value %q of key %q: %s", ErrInvalidSelector, v, k, msg)
		}
		if _, dup := sel[k]; dup {
			return nil, fmt.Errorf("%w: key %q given twice", ErrInvalidSelector, k)
		}
		sel[k] = v
	}
	return sel, nil
}

// SanitizeLabelValue turns an arbitrary string (a board model such as
// "Raspberry Pi 4 Model B Rev 1.4") into a valid label value: every run of
// characters outside [A-Za-z0-9._-] becomes one "-", leading and trailing
// separators are dropped, and the result is cut to MaxLabelValueLength.
func SanitizeLabelValue(s string) string {
	var b strings.Builder
	dash := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if isLabelValueChar(c) {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			dash = false
			b.WriteByte(c)
			continue
		}
		dash = true
	}
	out := b.String()
	if len(out) > MaxLabelValueLength {
		out = out[:MaxLabelValueLength]
	}
	return strings.Trim(out, "-._")
}

// NameFromHost is the node name a board takes from its host name when it
// is given none: the host name's first label in lower case, without
// leading or trailing '-' ("Pi-4.lan" → "pi-4"). The result is not
// checked: ValidateName says whether it is a name, and a host name that
// does not make one ("my_pi") needs a name given explicitly.
func NameFromHost(host string) string {
	first, _, _ := strings.Cut(host, ".")
	return strings.Trim(strings.ToLower(first), "-")
}

// ValidateName checks a DNS-label-like object name: lower-case letters,
// digits and '-', starting and ending with a letter or digit, at most
// MaxNameLength characters.
func ValidateName(name string) error {
	if msg := nameProblem(name); msg != "" {
		return fmt.Errorf("api: name %q: %s", name, msg)
	}
	return nil
}

// ValidateLabelKey checks a label key: an optional DNS-subdomain prefix and
// '/', then a name of at most 63 characters from [A-Za-z0-9._-] starting and
// ending with a letter or digit ("tier", "herd.dev/arch").
func ValidateLabelKey(k string) error {
	if msg := labelKeyProblem(k); msg != "" {
		return fmt.Errorf("api: label key %q: %s", k, msg)
	}
	return nil
}

// ValidateLabelValue checks a label value: at most 63 characters from
// [A-Za-z0-9._-], possibly empty.
func ValidateLabelValue(v string) error {
	if msg := labelValueProblem(v); msg != "" {
		return fmt.Errorf("api: label value %q: %s", v, msg)
	}
	return nil
}

// nameProblem returns what is wrong with a DNS label, or "".
func nameProblem(s string) string {
	switch {
	case s == "":
		return "required"
	case len(s) > MaxNameLength:
		return fmt.Sprintf("at most %d characters, got %d", MaxNameLength, len(s))
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return "only lower-case letters, digits and '-' are allowed"
		}
	}
	if s[0] == '-' || s[len(s)-1] == '-' {
		return "must start and end with a lower-case letter or digit"
	}
	return ""
}

// labelKeyProblem returns what is wrong with a label key, or "".
func labelKeyProblem(k string) string {
	if k == "" {
		return "empty"
	}
	name := k
	if i := strings.LastIndexByte(k, '/'); i >= 0 {
		prefix := k[:i]
		name = k[i+1:]
		if prefix == "" || len(prefix) > MaxLabelPrefixLength {
			return fmt.Sprintf("the prefix before '/' must be 1 to %d characters", MaxLabelPrefixLength)
		}
		for j := 0; j < len(prefix); j++ {
			c := prefix[j]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
				return "the prefix before '/' must be a DNS name such as herd.dev"
			}
		}
		if !isAlnum(prefix[0]) || !isAlnum(prefix[len(prefix)-1]) {
			return "the prefix before '/' must start and end with a letter or digit"
		}
	}
	if name == "" || len(name) > MaxLabelNameLength {
		return fmt.Sprintf("the name must be 1 to %d characters", MaxLabelNameLength)
	}
	for j := 0; j < len(name); j++ {
		if !isLabelValueChar(name[j]) {
			return "only letters, digits, '.', '_', '-' and one '/' after a prefix are allowed"
		}
	}
	if !isAlnum(name[0]) || !isAlnum(name[len(name)-1]) {
		return "must start and end with a letter or digit"
	}
	return ""
}

// labelValueProblem returns what is wrong with a label value, or "".
func labelValueProblem(v string) string {
	if len(v) > MaxLabelValueLength {
		return fmt.Sprintf("at most %d characters, got %d", MaxLabelValueLength, len(v))
	}
	for j := 0; j < len(v); j++ {
		if !isLabelValueChar(v[j]) {
			return "only letters, digits, '.', '_' and '-' are allowed"
		}
	}
	return ""
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func isLabelValueChar(c byte) bool {
	return isAlnum(c) || c == '.' || c == '_' || c == '-'
}
