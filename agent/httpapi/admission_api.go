package httpapi

import (
	"github.com/herd-dev/herd/api"
)

// SetDefaults implements Admission with api.SetDefaults.
func (APIAdmission) SetDefaults(o api.Object) { api.SetDefaults(o) }

// Validate implements Admission with api.ValidationErrors.
func (APIAdmission) Validate(o api.Object) []api.FieldError { return api.ValidationErrors(o) }

// Selector implements Admission with api.ParseSelector and api.MatchLabels.
func (APIAdmission) Selector(s string) (func(map[string]string) bool, error) {
	sel, err := api.ParseSelector(s)
	if err != nil {
		return nil, err
	}
	return func(labels map[string]string) bool { return api.MatchLabels(sel, labels) }, nil
}
