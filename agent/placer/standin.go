package placer

import (
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/units"
)

// STAND-IN (branch board): these stand for what branch units adds to
// package units and api (units.ActionWriteEnv, units.EnvDir,
// units.EnvFilePath, units.RenderEnvFile and api.File.AllowSetID). At
// merge, make each one its counterpart (or replace the uses) and delete the
// fallback bodies.

// actionWriteEnv is units.ActionWriteEnv: Plan's write of a unit's
// environment file (Content), right before the unit writes. The placer
// writes it to envFilePath(Unit), mode 0600, whatever Action.Path and
// Action.Mode say (they are always that).
const actionWriteEnv units.ActionType = "write-env"

// envDir is the root-only (0700) directory of the pods' env files.
const envDir = "/etc/herd/env"

// envFilePath is where a unit's environment file lives on a board
// (units.EnvFilePath).
func envFilePath(unit string) string {
	return path.Join(envDir, strings.TrimSuffix(unit, ".service")+".env")
}

// renderEnvFile returns a pod's environment file (units.RenderEnvFile).
func renderEnvFile(p *api.Pod) ([]byte, error) {
	env := p.Spec.Template.Env
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(env)) {
		v := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "$", `\$`, "`", "\\`").Replace(env[k])
		b.WriteString(k + `="` + v + "\"\n")
	}
	return []byte(b.String()), nil
}

// allowSetID reports whether a pod file may carry setuid/setgid bits
// (api.File.AllowSetID).
func allowSetID(f api.File) bool { return false }
