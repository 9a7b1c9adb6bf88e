package unitreport

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"golang.org/x/crypto/ssh"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/units"
)

// Kind is the gossip message kind of a unit report (gossip.Send's kind).
const Kind byte = 'U'

// MaxUnits is the most units one report may carry; a board with more
// herd units sends none (the leader lists it over SSH).
const MaxUnits = 256

// Report is what a board's agent says about its herd units at one moment.
type Report struct {
	// Node is the board's node name.
	Node string `json:"node"`
	// Mark orders this report among the board's reports.
	Mark Mark `json:"mark"`
	// Units are the board's herd units, as the leader's SSH listing would
	// give them (sshexec.ListLocal run on the board).
	Units []units.UnitState `json:"units"`
}

// signContext is signed before the payload: a report signature is valid
// for nothing else the host key signs.
const signContext = "herd unit report v1\x00"

// envelope is the wire form: the payload as bytes, exactly as signed, and
// the signature.
type envelope struct {
	Payload []byte         `json:"p"`
	Sig     *ssh.Signature `json:"s"`
}

// Errors of Open.
var (
	// ErrMalformed: the message is not a well-formed report.
	ErrMalformed = errors.New("unitreport: malformed report")
	// ErrUnknownKey: the named board's host key is not known.
	ErrUnknownKey = errors.New("unitreport: no host key for node")
	// ErrBadSignature: the signature does not verify against the named
	// board's host key.
	ErrBadSignature = errors.New("unitreport: bad signature")
)

// Sign returns the wire form of r signed with signer (the board's SSH
// host key). It refuses a report Open would refuse.
func Sign(r Report, signer ssh.Signer, rand io.Reader) ([]byte, error) {
	if err := r.validate(); err != nil {
		return nil, err
	}
	payload, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("unitreport: %w", err)
	}
	sig, err := signer.Sign(rand, signed(payload))
	if err != nil {
		return nil, fmt.Errorf("unitreport: sign: %w", err)
	}
	return json.Marshal(envelope{Payload: payload, Sig: sig})
}

// KeyLookup returns the host key a node announces (the key the leader's
// SSH connections to it verify).
type KeyLookup func(node string) (ssh.PublicKey, error)

// Open decodes a report's wire form and checks it: well-formed (known
// fields only, a valid node name, a positive mark, at most MaxUnits herd
// units with unique names) and signed by the host key lookup gives for
// the node it names. The errors match ErrMalformed, ErrUnknownKey or
// ErrBadSignature. Open reads body once and allocates in proportion to
// it; the caller bounds its size (gossip.MaxMessage).
func Open(body []byte, lookup KeyLookup) (Report, error) {
	var env envelope
	if err := strictDecode(body, &env); err != nil {
		return Report{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if env.Sig == nil || len(env.Payload) == 0 {
		return Report{}, fmt.Errorf("%w: no payload or no signature", ErrMalformed)
	}
	var r Report
	if err := strictDecode(env.Payload, &r); err != nil {
		return Report{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if err := r.validate(); err != nil {
		return Report{}, err
	}
	key, err := lookup(r.Node)
	if err != nil || key == nil {
		return Report{}, fmt.Errorf("%w %s: %v", ErrUnknownKey, r.Node, err)
	}
	if err := key.Verify(signed(env.Payload), env.Sig); err != nil {
		return Report{}, fmt.Errorf("%w: report from %s: %v", ErrBadSignature, r.Node, err)
	}
	return r, nil
}

// validate checks what Open promises about a decoded report.
func (r Report) validate() error {
	if err := api.ValidateName(r.Node); err != nil {
		return fmt.Errorf("%w: node %q: %v", ErrMalformed, r.Node, err)
	}
	if r.Mark.Epoch <= 0 || r.Mark.Seq == 0 {
		return fmt.Errorf("%w: mark %v: epoch and seq must be positive", ErrMalformed, r.Mark)
	}
	if len(r.Units) > MaxUnits {
		return fmt.Errorf("%w: %d units, at most %d", ErrMalformed, len(r.Units), MaxUnits)
	}
	seen := make(map[string]bool, len(r.Units))
	for i, u := range r.Units {
		pod, ok := api.PodFromUnitName(u.Unit)
		if !ok {
			return fmt.Errorf("%w: units[%d]: %q is not a herd unit", ErrMalformed, i, u.Unit)
		}
		if seen[u.Unit] {
			return fmt.Errorf("%w: units[%d]: %s twice", ErrMalformed, i, u.Unit)
		}
		seen[u.Unit] = true
		if err := validInstances(pod, u.Instances); err != nil {
			return fmt.Errorf("%w: units[%d]: %v", ErrMalformed, i, err)
		}
	}
	return nil
}

// validInstances checks the instances reported with pod's unit: at most
// api.MaxJobInstances, each an instance of that pod's template, once,
// with no instances of its own.
func validInstances(pod string, ins []units.UnitState) error {
	if len(ins) > api.MaxJobInstances {
		return fmt.Errorf("%d instances, at most %d", len(ins), api.MaxJobInstances)
	}
	seen := make(map[string]bool, len(ins))
	for j, in := range ins {
		p, _, ok := api.PodFromInstanceName(in.Unit)
		switch {
		case !ok || p != pod:
			return fmt.Errorf("instances[%d]: %q is not an instance of %s", j, in.Unit, api.TemplateUnitName(pod))
		case seen[in.Unit]:
			return fmt.Errorf("instances[%d]: %s twice", j, in.Unit)
		case len(in.Instances) > 0:
			return fmt.Errorf("instances[%d]: an instance has no instances", j)
		}
		seen[in.Unit] = true
	}
	return nil
}

func signed(payload []byte) []byte {
	return append([]byte(signContext), payload...)
}

// strictDecode decodes exactly one JSON value with no unknown fields.
func strictDecode(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("data after the report")
	}
	return nil
}
