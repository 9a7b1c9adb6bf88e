package httpapi

import (
	"errors"

	"github.com/herd-dev/herd/api"
)

// SetDefaults implements Admission with api.SetDefaults.
func (APIAdmission) SetDefaults(o api.Object) { api.SetDefaults(o) }

// Validate implements Admission with api.Validate.
func (APIAdmission) Validate(o api.Object) []api.FieldError {
	err := api.Validate(o)
	if err == nil {
		return nil
	}
	var fe api.FieldErrors
	if errors.As(err, &fe) {
		return fe
	}
	return []api.FieldError{{Message: err.Error()}}
}

// Selector implements Admission with api.ParseSelector and api.MatchLabels.
func (APIAdmission) Selector(s string) (func(map[string]string) bool, error) {
	sel, err := api.ParseSelector(s)
	if err != nil {
		return nil, err
	}
	return func(labels map[string]string) bool { return api.MatchLabels(sel, labels) }, nil
}
