package cli

import (
	"github.com/herd-dev/herd/api"
)

// apiFuncs are the api package's admission and label helpers that herdctl
// calls. They sit behind function fields so that one place wires them
// (defaultAPIFuncs) and tests can swap in stand-ins. All of them are pure
// and safe for concurrent use.
type apiFuncs struct {
	// decodeManifests decodes manifest files strictly (and validates the
	// objects in them). Errors carry file:line:col; an api.ManifestErrors is
	// printed one problem per line.
	decodeManifests func(files []api.ManifestFile) ([]api.Object, error)
	// validate returns every problem with o, nil when it is valid.
	validate func(o api.Object) []api.FieldError
	// formatLabels renders labels or a selector as "a=b,c=d", sorted.
	formatLabels func(map[string]string) string
	// parseSelector parses "a=b,c=d"; "" is an error.
	parseSelector func(string) (map[string]string, error)
	// matchLabels reports whether labels carry every pair of a non-empty
	// selector.
	matchLabels func(selector, labels map[string]string) bool
}

// defaultAPIFuncs returns the helpers herdctl uses: package api's.
func defaultAPIFuncs() apiFuncs {
	return apiFuncs{
		decodeManifests: api.DecodeManifests,
		validate:        api.ValidationErrors,
		formatLabels:    api.FormatLabels,
		parseSelector:   api.ParseSelector,
		matchLabels:     api.MatchLabels,
	}
}
