package cli

import (
	"strings"

	"github.com/herd-dev/herd/api"
)

// parseKind resolves a kind as users type it: singular, plural or the
// kubectl short name, in any case.
func parseKind(s string) (api.Kind, error) {
	switch strings.ToLower(s) {
	case "deployment", "deployments", "deploy":
		return api.KindDeployment, nil
	case "daemon", "daemons", "ds":
		return api.KindDaemon, nil
	case "pod", "pods", "po":
		return api.KindPod, nil
	case "service", "services", "svc":
		return api.KindService, nil
	case "node", "nodes", "no":
		return api.KindNode, nil
	case "secret", "secrets":
		return api.KindSecret, nil
	case "job", "jobs":
		return api.KindJob, nil
	}
	return "", usagef("unknown kind %q (want deployments (deploy), daemons (ds), pods (po), services (svc), nodes (no), secrets or jobs)", s)
}

// singular is the kind as herdctl prints it in "kind/name".
func singular(k api.Kind) string {
	return strings.TrimSuffix(string(k), "s")
}

// ref is "kind/name" as herdctl prints it.
func ref(k api.Kind, name string) string { return singular(k) + "/" + name }

// splitKindName parses the "KIND NAME..." or "KIND/NAME..." arguments of
// describe, delete and scale. Every name belongs to one kind.
func splitKindName(args []string) (api.Kind, []string, error) {
	if len(args) == 0 {
		return "", nil, usagef("missing KIND")
	}
	var kind api.Kind
	var names []string
	if strings.Contains(args[0], "/") {
		// kind/name [kind/name...]
		for _, a := range args {
			k, n, ok := strings.Cut(a, "/")
			if !ok || n == "" {
				return "", nil, usagef("%q: want KIND/NAME", a)
			}
			pk, err := parseKind(k)
			if err != nil {
				return "", nil, err
			}
			if kind != "" && pk != kind {
				return "", nil, usagef("%q: all objects must be of one kind (%s)", a, kind)
			}
			kind = pk
			names = append(names, n)
		}
		return kind, names, nil
	}
	kind, err := parseKind(args[0])
	if err != nil {
		return "", nil, err
	}
	for _, n := range args[1:] {
		if strings.Contains(n, "/") {
			return "", nil, usagef("%q: give either KIND NAME or KIND/NAME", n)
		}
	}
	return kind, args[1:], nil
}

// kindCompletions are offered for a KIND argument.
func kindCompletions() []string {
	out := make([]string, len(api.Kinds))
	for i, k := range api.Kinds {
		out[i] = string(k)
	}
	return out
}

// objectName returns "kinds/name" as the API names objects in errors.
func objectName(o api.Object) string {
	return api.ObjectRef(o.GetKind(), o.GetMeta().Name)
}
