package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/herd-dev/herd/api"
)

// cordonCmd builds `herdctl cordon NODE` (on = true) and `uncordon NODE`.
func (a *app) cordonCmd(on bool) *cobra.Command {
	use, short := "cordon NODE...", "Mark boards unschedulable: no new pods are placed there"
	if !on {
		use, short = "uncordon NODE...", "Mark boards schedulable again"
	}
	return &cobra.Command{
		Use:   use,
		Short: short,
		Long: short + `. Pods already running there stay (like kubectl cordon);
herdctl drain moves them. Uncordon also ends a drain (herdctl drain) and
lets the daemons' pods stopped by drain --daemons come back.`,
		Args: argsBetween(1, 1<<10),
		ValidArgsFunction: func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
			return a.completeNames(cmd, api.KindNode, nil), cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			ctx, cancel := a.cmdContext(cmd, defaultRequestTimeout)
			defer cancel()
			var errs []error
			for _, name := range args {
				name = trimKindPrefix(name, "node")
				changed, err := setUnschedulable(ctx, c, name, on)
				if err != nil {
					errs = append(errs, fmt.Errorf("node/%s: %w", name, err))
					continue
				}
				verb := map[bool]string{true: "cordoned", false: "uncordoned"}[on]
				if !changed {
					verb = "already " + verb
				}
				fmt.Fprintf(a.stdout, "node/%s %s\n", name, verb)
			}
			return errors.Join(errs...)
		},
	}
}

// setUnschedulable sets a node's cordon flag (uncordon also clears a
// drain request) with compare-and-swap.
func setUnschedulable(ctx context.Context, c apiClient, name string, on bool) (bool, error) {
	return updateNodeChanged(ctx, c, name, func(n *api.Node) bool {
		if n.Spec.Unschedulable == on && (on || !n.Draining()) {
			return false
		}
		n.Spec.Unschedulable = on
		if !on {
			n.Spec.Drain = nil // uncordon ends a drain too
		}
		return true
	})
}

func trimKindPrefix(s, kind string) string {
	for _, p := range []string{kind + "/", kind + "s/"} {
		if len(s) > len(p) && s[:len(p)] == p {
			return s[len(p):]
		}
	}
	return s
}
