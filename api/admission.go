package api

// This file declares the admission entry points; their implementations live
// in validate.go, defaults.go and manifest.go.

// FieldError is one problem with one field of one object.
type FieldError struct {
	// Object is "kind/name", e.g. "deployments/web".
	Object string `json:"object,omitempty"`
	// Field is the path, e.g. "spec.template.ports[0].port".
	Field string `json:"field"`
	// Message says what is wrong and what is allowed.
	Message string `json:"message"`
}
