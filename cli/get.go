package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/herd-dev/herd/api"
	"github.com/herd-dev/herd/client"
)

// Output formats of get.
const (
	outTable = "table"
	outWide  = "wide"
	outJSON  = "json"
	outName  = "name"
)

func parseOutput(s string) (string, error) {
	switch s {
	case "", outTable:
		return outTable, nil
	case outWide, outJSON, outName:
		return s, nil
	case "yaml":
		return "", usagef("-o yaml is not supported: use -o json")
	}
	return "", usagef("-o %q: want table, wide, json or name", s)
}

func (a *app) getCmd() *cobra.Command {
	var output, selector string
	var watch, stale bool
	cmd := &cobra.Command{
		Use:   "get KIND [NAME]",
		Short: "List objects of a kind, or show one",
		Long: `List objects of a kind, or show one.

Kinds: deployments (deploy), daemons (ds), pods (po), services (svc),
nodes (no); singular forms work too, and KIND/NAME.

With --watch, herdctl lists, then prints a line each time an object changes,
until interrupted (or --timeout).

Reads are linearizable: the agent answers after the leader confirmed its
leadership, so they reflect every acknowledged write and fail without a
leader. With --stale the agent answers from its own copy, which works
without a leader but may be behind.`,
		Example: `  herdctl get pods
  herdctl get deploy web -o json
  herdctl get pods -l app=web -o wide -w`,
		Args:              argsBetween(1, 2),
		ValidArgsFunction: a.kindThenNames(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, name, err := getArgs(args)
			if err != nil {
				return err
			}
			out, err := parseOutput(output)
			if err != nil {
				return err
			}
			var sel map[string]string
			if selector != "" {
				if sel, err = a.api.parseSelector(selector); err != nil {
					return usageError{fmt.Errorf("-l: %w", err)}
				}
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			ctx, cancel := a.streamContext(cmd, watch)
			defer cancel()
			if stale {
				ctx = client.WithStale(ctx)
			}
			g := &getter{app: a, c: c, kind: kind, name: name, sel: sel, out: out}
			if watch {
				return g.watch(ctx)
			}
			return g.once(ctx)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&output, "output", "o", outTable, "output format: table, wide, json or name")
	f.StringVarP(&selector, "selector", "l", "", "only objects whose labels match, e.g. app=web,tier=front")
	f.BoolVarP(&watch, "watch", "w", false, "after listing, print changes as they happen")
	f.BoolVar(&stale, "stale", false, "read the agent's own copy, possibly behind the leader (works without a leader)")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{outTable, outWide, outJSON, outName}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// getArgs parses "KIND [NAME]" or "KIND/NAME".
func getArgs(args []string) (api.Kind, string, error) {
	if len(args) == 1 && strings.Contains(args[0], "/") {
		kind, names, err := splitKindName(args)
		if err != nil {
			return "", "", err
		}
		return kind, names[0], nil
	}
	kind, err := parseKind(args[0])
	if err != nil {
		return "", "", err
	}
	if len(args) == 2 {
		return kind, args[1], nil
	}
	return kind, "", nil
}

// getter runs one get command.
type getter struct {
	*app
	c    apiClient
	kind api.Kind
	name string
	sel  map[string]string
	out  string

	widths []int // column widths printed so far (table output, watch)
}

// keep reports whether o is shown.
func (g *getter) keep(o api.Object) bool {
	if g.name != "" && o.GetMeta().Name != g.name {
		return false
	}
	// An empty selector matches nothing to api.MatchLabels; no -l means all.
	return len(g.sel) == 0 || g.api.matchLabels(g.sel, o.GetMeta().Labels)
}

func (g *getter) printer() printer {
	return printer{Now: g.clock.Now(), Wide: g.out == outWide, FormatLabels: g.api.formatLabels}
}

// once prints the objects once.
func (g *getter) once(ctx context.Context) error {
	var raws []api.RawObject
	if g.name != "" {
		r, err := g.c.Get(ctx, g.kind, g.name)
		if err != nil {
			return err
		}
		raws = []api.RawObject{r}
	} else {
		var err error
		if raws, _, err = g.c.List(ctx, g.kind); err != nil {
			return err
		}
	}
	objs, kept, err := g.filter(raws)
	if err != nil {
		return err
	}
	if g.name != "" && g.out == outJSON && len(kept) == 1 {
		return writeJSON(g.stdout, kept[0], true)
	}
	switch g.out {
	case outJSON:
		if kept == nil {
			kept = []api.RawObject{}
		}
		return writeJSON(g.stdout, struct {
			Items []api.RawObject `json:"items"`
		}{kept}, true)
	case outName:
		for _, o := range objs {
			fmt.Fprintln(g.stdout, ref(o.GetKind(), o.GetMeta().Name))
		}
		return nil
	}
	if len(objs) == 0 {
		fmt.Fprintln(g.stderr, "No resources found.")
		return nil
	}
	t := g.printer().table(g.kind, objs)
	t.write(g.stdout, t.widths(nil), false)
	return nil
}

// filter converts raws and keeps the shown ones.
func (g *getter) filter(raws []api.RawObject) ([]api.Object, []api.RawObject, error) {
	var objs []api.Object
	var kept []api.RawObject
	for _, r := range raws {
		if r.Kind == "" {
			r.Kind = g.kind
		}
		o, err := api.FromRaw(r)
		if err != nil {
			return nil, nil, fmt.Errorf("%s/%s: %w", r.Kind, r.Metadata.Name, err)
		}
		if g.keep(o) {
			objs = append(objs, o)
			kept = append(kept, r)
		}
	}
	return objs, kept, nil
}

// watch lists, then prints changes until ctx ends. A RELIST event or a
// broken stream makes it list again and print what changed meanwhile.
func (g *getter) watch(ctx context.Context) error {
	if g.name != "" {
		// Fail early, with the server's message, on a missing object.
		if _, err := g.c.Get(ctx, g.kind, g.name); err != nil {
			return err
		}
	}
	last := map[string]api.Object{} // shown objects by name
	first := true
	for {
		raws, rv, err := g.c.List(ctx, g.kind)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		objs, _, err := g.filter(raws)
		if err != nil {
			return err
		}
		g.relisted(objs, last, first)
		first = false
		end, err := watchEvents(ctx, g.c, g.kind, rv, func(ev api.WatchEvent) (bool, error) {
			return false, g.event(ev, last)
		})
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		if end == watchBroken {
			if err := sleepCtx(ctx, g.watchRetry); err != nil {
				return nil
			}
		}
	}
}

// relisted prints what a (re-)list shows: everything the first time, then
// only objects that changed or went away since last.
func (g *getter) relisted(objs []api.Object, last map[string]api.Object, first bool) {
	if first && (g.out == outTable || g.out == outWide) {
		if len(objs) == 0 {
			fmt.Fprintln(g.stderr, "No resources found.")
		} else {
			t := g.printer().table(g.kind, objs)
			g.widths = t.widths(nil)
			t.write(g.stdout, g.widths, false)
		}
		for _, o := range objs {
			last[o.GetMeta().Name] = o
		}
		return
	}
	present := map[string]bool{}
	for _, o := range objs {
		name := o.GetMeta().Name
		present[name] = true
		prev, ok := last[name]
		last[name] = o
		switch {
		case first || !ok:
			g.emit(api.EventAdded, o)
		case prev.GetMeta().ResourceVersion != o.GetMeta().ResourceVersion:
			g.emit(api.EventModified, o)
		}
	}
	var gone []string
	for name := range last {
		if !present[name] {
			gone = append(gone, name)
		}
	}
	sort.Strings(gone)
	for _, name := range gone {
		g.emit(api.EventDeleted, last[name])
		delete(last, name)
	}
}

// event prints one watch event.
func (g *getter) event(ev api.WatchEvent, last map[string]api.Object) error {
	if ev.Object.Kind != "" && ev.Object.Kind != g.kind {
		return nil
	}
	ev.Object.Kind = g.kind
	o, err := api.FromRaw(ev.Object)
	if err != nil {
		return fmt.Errorf("watch: %s/%s: %w", ev.Object.Kind, ev.Object.Metadata.Name, err)
	}
	name := o.GetMeta().Name
	_, shown := last[name]
	if !g.keep(o) {
		if !shown {
			return nil
		}
		// It no longer matches the selector: show it one last time.
		ev.Type = api.EventDeleted
	}
	if ev.Type == api.EventDeleted {
		delete(last, name)
	} else {
		last[name] = o
	}
	g.emit(ev.Type, o)
	return nil
}

// watchEnd says why watchEvents returned.
type watchEnd int

const (
	watchStopped watchEnd = iota // fn asked to stop, or an error
	watchRelist                  // the server asked for a re-list
	watchBroken                  // the stream ended: re-list after a pause
)

// watchEvents watches kind from fromRV and hands each event to fn until fn
// returns true or an error, the stream ends or asks for a re-list, or ctx
// ends (then it returns ctx.Err()). The watch is cancelled on return.
func watchEvents(ctx context.Context, c apiClient, kind api.Kind, fromRV uint64, fn func(api.WatchEvent) (bool, error)) (watchEnd, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch, err := c.Watch(wctx, kind, fromRV)
	if apiErrorCode(err) == "compacted" {
		return watchRelist, nil // fromRV is too old: list again
	}
	if err != nil {
		return watchStopped, err
	}
	for {
		select {
		case <-ctx.Done():
			return watchStopped, ctx.Err()
		case ev, ok := <-ch:
			if !ok {
				return watchBroken, nil
			}
			if ev.Type == api.EventRelist {
				return watchRelist, nil
			}
			stop, err := fn(ev)
			if err != nil || stop {
				return watchStopped, err
			}
		}
	}
}

// emit prints one object in the chosen format. Table rows keep the column
// widths printed so far, growing them when needed; the header is printed
// before the first row only.
func (g *getter) emit(t api.EventType, o api.Object) {
	switch g.out {
	case outJSON:
		raw, err := api.ToRaw(o)
		if err != nil {
			fmt.Fprintf(g.stderr, "error: %v\n", err)
			return
		}
		_ = writeJSON(g.stdout, api.WatchEvent{Type: t, ResourceVersion: o.GetMeta().ResourceVersion, Object: raw}, false)
	case outName:
		fmt.Fprintln(g.stdout, ref(o.GetKind(), o.GetMeta().Name))
	default:
		p := g.printer()
		t := &table{Header: p.header(g.kind), Rows: [][]string{p.row(o)}}
		noHeader := g.widths != nil
		g.widths = t.widths(g.widths)
		t.write(g.stdout, g.widths, noHeader)
	}
}

// writeJSON prints v as JSON, indented or on one line.
func writeJSON(w io.Writer, v any, indent bool) error {
	var b []byte
	var err error
	if indent {
		b, err = json.MarshalIndent(v, "", "  ")
	} else {
		b, err = json.Marshal(v)
	}
	if err != nil {
		return err
	}
	b = append(b, '\n')
	_, err = w.Write(b)
	return err
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
