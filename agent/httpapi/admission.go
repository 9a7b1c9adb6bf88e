package httpapi

import (
	"github.com/herd-dev/herd/api"
)

// Admission is the per-object logic the server runs on what clients write,
// and the label selector syntax of list and watch. The default,
// APIAdmission, is package api's; tests may pass their own. Implementations
// must be safe for concurrent use and must not keep o.
type Admission interface {
	// SetDefaults fills defaulted fields of o in place.
	SetDefaults(o api.Object)
	// Validate returns every problem with o (field paths relative to the
	// object, Object set or left empty), or nil when o is valid.
	Validate(o api.Object) []api.FieldError
	// Selector parses a label selector such as "app=web,tier=front" into a
	// predicate on an object's labels.
	Selector(s string) (func(labels map[string]string) bool, error)
}

// APIAdmission is the Admission of package api: api.SetDefaults,
// api.Validate, api.ParseSelector and api.MatchLabels.
type APIAdmission struct{}

var _ Admission = APIAdmission{}
