package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/herd-dev/herd/api"
)

// maxUndoAttempts bounds rollout undo's compare-and-swap retries.
const maxUndoAttempts = 5

// workload is a deployment or daemon as rollout history and undo see it.
type workload struct {
	obj      api.Object
	template *api.PodTemplate // the spec's, settable
	history  []api.TemplateRevision
	revision string // status.revision
}

// current returns the revision w's pods run now (api.CurrentRevision) and
// the history undo picks from: for a template with secrets, whose
// revisions also move when a secret changes, an entry holding the current
// template counts as current (an undo restores templates, never a
// secret's earlier value).
func (w workload) current() (string, []api.TemplateRevision) {
	cur := api.CurrentRevision(*w.template, w.revision)
	if len(w.template.Secrets) == 0 {
		return cur, w.history
	}
	hist := slices.Clone(w.history)
	for i := range hist {
		if hist[i].Template != nil && len(templateDiff(hist[i].Template, w.template)) == 0 {
			hist[i].Hash = cur
		}
	}
	return cur, hist
}

// workloadOf reads raw (a deployment or daemon) as a workload.
func workloadOf(raw api.RawObject) (workload, error) {
	o, err := api.FromRaw(raw)
	if err != nil {
		return workload{}, err
	}
	switch o := o.(type) {
	case *api.Deployment:
		return workload{obj: o, template: &o.Spec.Template, history: o.Status.History, revision: o.Status.Revision}, nil
	case *api.Daemon:
		return workload{obj: o, template: &o.Spec.Template, history: o.Status.History, revision: o.Status.Revision}, nil
	}
	return workload{}, fmt.Errorf("%s has no rollout history (only deployments and daemons)", raw.Kind)
}

// rolloutArgs parses "(deployment|daemon) NAME" for the rollout verb.
func rolloutArgs(verb string, args []string) (api.Kind, string, error) {
	kind, name, err := getArgs(args)
	if err != nil {
		return "", "", err
	}
	if kind != api.KindDeployment && kind != api.KindDaemon {
		return "", "", usagef("rollout %s: only deployments and daemons have rollouts, not %s", verb, kind)
	}
	if name == "" {
		return "", "", usagef("rollout %s: missing NAME", verb)
	}
	return kind, name, nil
}

// rolloutCompletion completes "(deployment|daemon) NAME".
func (a *app) rolloutCompletion(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	switch len(args) {
	case 0:
		return []string{string(api.KindDeployment), string(api.KindDaemon)}, cobra.ShellCompDirectiveNoFileComp
	case 1:
		if kind, err := parseKind(args[0]); err == nil && (kind == api.KindDeployment || kind == api.KindDaemon) {
			return a.completeNames(cmd, kind, nil), cobra.ShellCompDirectiveNoFileComp
		}
	}
	return nil, cobra.ShellCompDirectiveNoFileComp
}

func (a *app) rolloutHistoryCmd() *cobra.Command {
	var revision int64
	cmd := &cobra.Command{
		Use:   "history (deployment|daemon) NAME",
		Short: "List the templates a deployment or daemon ran, or show one",
		Long: `List the last 10 pod templates of a deployment or daemon, oldest first:
the revision number (it only grows; a template applied again, or undone to,
gets a new one), the template's hash (the REVISION of its pods), the
generation and the time the controller first observed it, and what changed
from the revision before.

With --revision N, print that revision's template as a manifest.

The history is kept in the object's status by the controller. Templates
larger than the history's budget (128 KiB together) keep their line but
not their template, and cannot be undone to.`,
		Example: `  herdctl rollout history deployment web
  herdctl rollout history deploy/web --revision 3
  herdctl rollout history daemon node-exporter`,
		Args:              argsBetween(1, 2),
		ValidArgsFunction: a.rolloutCompletion,
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, name, err := rolloutArgs("history", args)
			if err != nil {
				return err
			}
			if cmd.Flags().Changed("revision") && revision < 1 {
				return usagef("rollout history: --revision must be at least 1, got %d", revision)
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			ctx, cancel := a.cmdContext(cmd, defaultRequestTimeout)
			defer cancel()
			raw, err := c.Get(ctx, kind, name)
			if err != nil {
				return err
			}
			w, err := workloadOf(raw)
			if err != nil {
				return err
			}
			if revision > 0 {
				out, err := showRevision(w, revision)
				if err != nil {
					return fmt.Errorf("%s: %w", ref(kind, name), err)
				}
				_, err = a.stdout.Write([]byte(out))
				return err
			}
			if len(w.history) == 0 {
				fmt.Fprintf(a.stdout, "%s has no rollout history yet\n", ref(kind, name))
				return nil
			}
			fmt.Fprint(a.stdout, historyTable(w.history, a.clock.Now()).String())
			return nil
		},
	}
	cmd.Flags().Int64Var(&revision, "revision", 0, "print this revision's template as a manifest")
	return cmd
}

// historyTable renders a history oldest first: REVISION HASH GENERATION
// APPLIED (an age at now) CHANGE.
func historyTable(h []api.TemplateRevision, now time.Time) *table {
	t := &table{Header: []string{"REVISION", "HASH", "GENERATION", "APPLIED", "CHANGE"}}
	for i := len(h) - 1; i >= 0; i-- {
		var older *api.TemplateRevision
		if i+1 < len(h) {
			older = &h[i+1]
		}
		e := h[i]
		gen := none
		if e.Generation > 0 {
			gen = strconv.FormatInt(e.Generation, 10)
		}
		t.Rows = append(t.Rows, []string{strconv.FormatInt(e.Revision, 10), e.Hash, gen, humanAge(e.Applied, now), changeSummary(older, &e)})
	}
	return t
}

// maxChangeFields is how many changed fields a history line names.
const maxChangeFields = 2

// changeSummary says what changed from older to e: the first changed
// template fields in diff's words (`~ exec[1]: "--v1" -> "--v2"`), or why
// it cannot tell.
func changeSummary(older, e *api.TemplateRevision) string {
	switch {
	case older == nil:
		return "(oldest kept)"
	case e.Template == nil || older.Template == nil:
		return "(template not kept)"
	}
	lines := templateDiff(older.Template, e.Template)
	if len(lines) == 0 && len(e.Template.Secrets) > 0 {
		return "(no template change: a secret it names changed)"
	}
	if len(lines) == 0 {
		return "(no template change)"
	}
	var parts []string
	for _, l := range lines[:min(len(lines), maxChangeFields)] {
		parts = append(parts, l)
	}
	s := strings.Join(parts, "; ")
	if n := len(lines) - maxChangeFields; n > 0 {
		s += fmt.Sprintf("; %d more", n)
	}
	return s
}

// templateDiff is diff's lines between two templates, paths from the
// template ("exec[1]", "env.GREETING").
func templateDiff(a, b *api.PodTemplate) []string {
	generic := func(t *api.PodTemplate) any {
		raw, _ := json.Marshal(t) // strings, ints, maps and slices: cannot fail
		var v any
		_ = json.Unmarshal(raw, &v)
		return v
	}
	var lines []string
	diffValue("", generic(a), generic(b), &lines)
	return lines
}

// showRevision is rollout history --revision: a header line, then the
// object with that revision's template as a manifest.
func showRevision(w workload, revision int64) (string, error) {
	e := api.FindRevision(w.history, revision)
	if e == nil {
		_, err := api.UndoTarget(w.history, "", revision) // names the revisions there are
		return "", err
	}
	if e.Template == nil {
		return "", fmt.Errorf("revision %d (%s): its template was not kept (the history keeps at most %d bytes of templates)", revision, e.Hash, api.MaxHistoryTemplateBytes)
	}
	o := withTemplate(w, *e.Template)
	m, err := api.EncodeManifest([]api.Object{o})
	if err != nil {
		return "", err
	}
	head := fmt.Sprintf("# %s revision %d: template %s, generation %d, applied %s\n",
		ref(o.GetKind(), o.GetMeta().Name), e.Revision, e.Hash, e.Generation, e.Applied.UTC().Format(time.RFC3339))
	return head + string(m), nil
}

// withTemplate returns a copy of w's object with template t and no status
// (an update writes labels and spec only: the history is not sent back).
func withTemplate(w workload, t api.PodTemplate) api.Object {
	switch o := w.obj.(type) {
	case *api.Deployment:
		c := *o
		c.Spec.Template = t.DeepCopy()
		c.Status = api.DeploymentStatus{}
		return &c
	case *api.Daemon:
		c := *o
		c.Spec.Template = t.DeepCopy()
		c.Status = api.DaemonStatus{}
		return &c
	}
	return w.obj
}

func (a *app) rolloutUndoCmd() *cobra.Command {
	var toRevision int64
	var dryRun, wait bool
	cmd := &cobra.Command{
		Use:   "undo (deployment|daemon) NAME",
		Short: "Roll a deployment or daemon back to an earlier template",
		Long: `Roll a deployment or daemon back to the template of an earlier revision
(the one before the current template, or --to-revision N from
"herdctl rollout history"). The undo is a new generation with the old
template: its pods are replaced by the usual rolling update, and the
revision gets a new number in the history.

The write is compare-and-swap on what was read; when another writer
changes the object in between, herdctl reads it again and retries (at most
5 times). It refuses an unknown revision, the current one, and one whose
template the history did not keep.

An undo changes the stored template: a later "herdctl apply -f" of the
manifest that made the bad revision rolls forward to it again (as with
kubectl). Fix the manifest too.`,
		Example: `  herdctl rollout undo deployment web
  herdctl rollout undo deployment web --to-revision 2 --wait
  herdctl rollout undo daemon node-exporter --dry-run`,
		Args:              argsBetween(1, 2),
		ValidArgsFunction: a.rolloutCompletion,
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, name, err := rolloutArgs("undo", args)
			if err != nil {
				return err
			}
			switch {
			case cmd.Flags().Changed("to-revision") && toRevision < 1:
				return usagef("rollout undo: --to-revision must be at least 1, got %d", toRevision)
			case dryRun && wait:
				return usagef("--wait and --dry-run exclude each other")
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			ctx, cancel := a.waitContext(cmd, wait)
			defer cancel()
			if err := a.undo(ctx, c, kind, name, toRevision, dryRun); err != nil {
				return err
			}
			if dryRun {
				return nil
			}
			if !wait {
				fmt.Fprintf(a.stdout, "follow it with: herdctl rollout status %s %s\n", singular(kind), name)
				return nil
			}
			return a.waitApplied(ctx, c, []api.ApplyResult{{Kind: kind, Name: name}}, a.effectiveTimeout(defaultWaitTimeout))
		},
	}
	f := cmd.Flags()
	f.Int64Var(&toRevision, "to-revision", 0, "the revision to go back to (default: the one before the current template)")
	f.BoolVar(&dryRun, "dry-run", false, "show what would change, change nothing")
	f.BoolVar(&wait, "wait", false, "wait until the rollback is rolled out (limit: --timeout, default 5m)")
	return cmd
}

// undo writes the undo target's template into kind/name, compare-and-swap
// on the object read; on a conflict it reads again and retries with the
// same target, at most maxUndoAttempts times in all.
func (a *app) undo(ctx context.Context, c apiClient, kind api.Kind, name string, toRevision int64, dryRun bool) error {
	who := ref(kind, name)
	var target api.TemplateRevision
	for attempt := 1; ; attempt++ {
		raw, err := c.Get(ctx, kind, name)
		if err != nil {
			return err
		}
		w, err := workloadOf(raw)
		if err != nil {
			return err
		}
		current, history := w.current()
		if attempt == 1 {
			if target, err = api.UndoTarget(history, current, toRevision); err != nil {
				return fmt.Errorf("%s: %w", who, err)
			}
		} else if current == target.Hash {
			fmt.Fprintf(a.stdout, "%s: revision %d's template (%s) was made current by another writer meanwhile\n", who, target.Revision, target.Hash)
			return nil
		}
		next := withTemplate(w, *target.Template)
		if dryRun {
			return a.printUndoDiff(w.obj, next, target)
		}
		stored, err := c.Update(ctx, next)
		if err == nil {
			fmt.Fprintf(a.stdout, "%s rolled back to revision %d (template %s): generation %d\n", who, target.Revision, target.Hash, stored.Metadata.Generation)
			return nil
		}
		if !api.IsCode(err, "conflict") {
			return err
		}
		if attempt == maxUndoAttempts {
			return fmt.Errorf("%s: still changing after %d attempts (another writer keeps updating it): %w", who, attempt, err)
		}
	}
}

// printUndoDiff prints what undo would change, diff's way.
func (a *app) printUndoDiff(live, next api.Object, target api.TemplateRevision) error {
	lr, err := api.ToRaw(live)
	if err != nil {
		return err
	}
	nr, err := api.ToRaw(next)
	if err != nil {
		return err
	}
	lines, err := diffObjects(&lr, &nr)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "%s would roll back to revision %d (template %s) (dry run)\n", ref(live.GetKind(), live.GetMeta().Name), target.Revision, target.Hash)
	for _, l := range lines {
		fmt.Fprintf(a.stdout, "  %s\n", l)
	}
	return nil
}
