package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

// addFileFlag adds -f/--filename with completion of *.toml files.
func addFileFlag(cmd *cobra.Command, files *[]string, what string) {
	cmd.Flags().StringArrayVarP(files, "filename", "f", nil, what+": a file, a folder (its *.toml files) or - for stdin; repeatable")
	_ = cmd.RegisterFlagCompletionFunc("filename", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return []string{"toml"}, cobra.ShellCompDirectiveFilterFileExt
	})
}

// loadAndValidate reads the manifests and validates them locally.
func (a *app) loadAndValidate(files []string) ([]manifestObject, error) {
	ms, err := loadManifests(files, a.stdin, a.api.decodeManifests)
	if err != nil {
		return nil, err
	}
	if err := validateManifests(ms, a.api.validate); err != nil {
		return nil, err
	}
	return ms, nil
}

func (a *app) applyCmd() *cobra.Command {
	var files []string
	var dryRun, wait bool
	cmd := &cobra.Command{
		Use:   "apply -f PATH",
		Short: "Create or update objects from TOML manifests",
		Long: `Create or update objects from TOML manifests.

Every manifest is decoded and validated locally first; nothing is sent unless
all of them are valid. Then all objects are applied together: all or none.
A deployment whose manifest leaves replicas out keeps its stored count
("herdctl scale" owns it).`,
		Example: `  herdctl apply -f web.toml
  herdctl apply -f manifests/ --wait
  cat web.toml | herdctl apply -f -`,
		Args:              argsBetween(0, 0),
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dryRun && wait {
				return usagef("--wait and --dry-run exclude each other")
			}
			ms, err := a.loadAndValidate(files)
			if err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			ctx, cancel := a.waitContext(cmd, wait)
			defer cancel()
			results, err := c.Apply(ctx, objectsOf(ms), dryRun)
			if err != nil {
				return err
			}
			suffix := ""
			if dryRun {
				suffix = " (server dry run)"
			}
			for _, r := range results {
				fmt.Fprintf(a.stdout, "%s %s%s\n", ref(r.Kind, r.Name), r.Action, suffix)
			}
			if !wait {
				return nil
			}
			return a.waitApplied(ctx, c, results, a.effectiveTimeout(defaultWaitTimeout))
		},
	}
	addFileFlag(cmd, &files, "manifests to apply")
	f := cmd.Flags()
	f.BoolVar(&dryRun, "dry-run", false, "ask the server what would happen, change nothing")
	f.BoolVar(&wait, "wait", false, "wait until applied deployments and daemons are rolled out (limit: --timeout, default 5m)")
	return cmd
}
