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
delete them, or scale, to move them.`,
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

// setUnschedulable sets a node's cordon flag with compare-and-swap,
// retrying a few times when the node controller writes in between.
func setUnschedulable(ctx context.Context, c apiClient, name string, on bool) (bool, error) {
	for attempt := 0; ; attempt++ {
		raw, err := c.Get(ctx, api.KindNode, name)
		if err != nil {
			return false, err
		}
		o, err := api.FromRaw(raw)
		if err != nil {
			return false, err
		}
		n := o.(*api.Node)
		if n.Spec.Unschedulable == on {
			return false, nil
		}
		n.Spec.Unschedulable = on
		_, err = c.Update(ctx, n)
		if err == nil {
			return true, nil
		}
		if !api.IsCode(err, "conflict") || attempt == 4 {
			return false, err
		}
	}
}

func trimKindPrefix(s, kind string) string {
	for _, p := range []string{kind + "/", kind + "s/"} {
		if len(s) > len(p) && s[:len(p)] == p {
			return s[len(p):]
		}
	}
	return s
}
