package cli

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/spf13/cobra"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/client"
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
			def := defaultRequestTimeout
			if wait {
				def = defaultWaitTimeout
			}
			ctx, cancel := a.cmdContext(cmd, def)
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
			return a.waitRollout(ctx, c, results, a.effectiveTimeout(def))
		},
	}
	addFileFlag(cmd, &files, "manifests to apply")
	f := cmd.Flags()
	f.BoolVar(&dryRun, "dry-run", false, "ask the server what would happen, change nothing")
	f.BoolVar(&wait, "wait", false, "wait until applied deployments and daemons are rolled out (limit: --timeout, default 5m)")
	return cmd
}

// rolloutStatus says whether o (a deployment or daemon) is rolled out, and
// how far it got.
func rolloutStatus(o api.Object) (done bool, msg string) {
	gen := o.GetMeta().Generation
	switch o := o.(type) {
	case *api.Deployment:
		want := replicasOf(o)
		st := o.Status
		switch {
		case st.ObservedGeneration < gen:
			return false, fmt.Sprintf("waiting for generation %d to be observed (observed %d)", gen, st.ObservedGeneration)
		case st.AvailableReplicas < want:
			return false, fmt.Sprintf("%d of %d replicas available (%d updated)", st.AvailableReplicas, want, st.UpdatedReplicas)
		case st.AvailableReplicas > want:
			return false, fmt.Sprintf("%d replicas available, want %d: waiting for old replicas to stop", st.AvailableReplicas, want)
		}
		return true, fmt.Sprintf("rolled out: %d of %d replicas available", st.AvailableReplicas, want)
	case *api.Daemon:
		st := o.Status
		switch {
		case st.ObservedGeneration < gen:
			return false, fmt.Sprintf("waiting for generation %d to be observed (observed %d)", gen, st.ObservedGeneration)
		case st.Ready != st.Desired:
			return false, fmt.Sprintf("%d of %d ready", st.Ready, st.Desired)
		}
		return true, fmt.Sprintf("rolled out: %d of %d ready", st.Ready, st.Desired)
	}
	return true, "nothing to wait for"
}

// rolloutTarget is one object apply --wait waits for.
type rolloutTarget struct {
	kind api.Kind
	name string
	rv   uint64 // newest resourceVersion seen
	msg  string // last progress printed
	done bool
}

// rolloutWaiter follows deployments and daemons until they are rolled out.
type rolloutWaiter struct {
	out     func(format string, args ...any)
	targets map[string]*rolloutTarget // by kind/name
}

// update takes a newer state of a target and prints progress.
func (w *rolloutWaiter) update(o api.Object) {
	t, ok := w.targets[ref(o.GetKind(), o.GetMeta().Name)]
	if !ok || o.GetMeta().ResourceVersion < t.rv {
		return
	}
	t.rv = o.GetMeta().ResourceVersion
	done, msg := rolloutStatus(o)
	t.done = done
	if msg != t.msg {
		t.msg = msg
		w.out("%s: %s\n", ref(t.kind, t.name), msg)
	}
}

func (w *rolloutWaiter) allDone() bool {
	for _, t := range w.targets {
		if !t.done {
			return false
		}
	}
	return true
}

// pending returns one error per target not yet rolled out.
func (w *rolloutWaiter) pending(timeout time.Duration) error {
	var errs multiError
	var keys []string
	for k, t := range w.targets {
		if !t.done {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		msg := w.targets[k].msg
		if msg == "" {
			msg = "no status yet"
		}
		errs = append(errs, fmt.Errorf("timed out after %v waiting for %s: %s", timeout, k, msg))
	}
	return errs
}

// waitRollout watches the applied deployments and daemons until each is
// rolled out (status.observedGeneration >= generation and every replica
// available/ready), printing progress lines, or until ctx ends.
func (a *app) waitRollout(ctx context.Context, c apiClient, results []client.ApplyResult, timeout time.Duration) error {
	w := &rolloutWaiter{
		out:     func(format string, args ...any) { fmt.Fprintf(a.stdout, format, args...) },
		targets: map[string]*rolloutTarget{},
	}
	kinds := map[api.Kind]bool{}
	for _, r := range results {
		if r.Kind != api.KindDeployment && r.Kind != api.KindDaemon {
			continue
		}
		kinds[r.Kind] = true
		w.targets[ref(r.Kind, r.Name)] = &rolloutTarget{kind: r.Kind, name: r.Name}
	}
	if len(w.targets) == 0 {
		return nil
	}
	failed := func(err error) error {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return w.pending(timeout)
		}
		return err
	}
	for {
		// List every kind involved, then watch everything from the oldest
		// list: replayed events are harmless (update ignores older states).
		var fromRV uint64
		first := true
		for _, k := range []api.Kind{api.KindDeployment, api.KindDaemon} {
			if !kinds[k] {
				continue
			}
			raws, rv, err := c.List(ctx, k)
			if err != nil {
				return failed(err)
			}
			if first || rv < fromRV {
				fromRV, first = rv, false
			}
			found := map[string]bool{}
			for _, r := range raws {
				r.Kind = k
				o, err := api.FromRaw(r)
				if err != nil {
					return err
				}
				found[ref(k, r.Metadata.Name)] = true
				w.update(o)
			}
			for key, t := range w.targets {
				if t.kind == k && !found[key] {
					return fmt.Errorf("%s was deleted while waiting for its rollout", key)
				}
			}
		}
		if w.allDone() {
			return nil
		}
		end, err := watchEvents(ctx, c, "", fromRV, func(ev api.WatchEvent) (bool, error) {
			key := ref(ev.Object.Kind, ev.Object.Metadata.Name)
			if _, ok := w.targets[key]; !ok {
				return false, nil
			}
			if ev.Type == api.EventDeleted {
				return false, fmt.Errorf("%s was deleted while waiting for its rollout", key)
			}
			o, err := api.FromRaw(ev.Object)
			if err != nil {
				return false, err
			}
			w.update(o)
			return w.allDone(), nil
		})
		if err != nil {
			return failed(err)
		}
		if end == watchStopped {
			return nil
		}
		if end == watchBroken {
			if err := sleepCtx(ctx, a.watchRetry); err != nil {
				return failed(err)
			}
		}
	}
}
