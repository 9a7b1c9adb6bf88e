package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/herd-dev/herd/api"
)

// eventsWatchRetry is the pause before listing again after a broken
// events watch.
const eventsWatchRetry = time.Second

func (a *app) eventsCmd() *cobra.Command {
	var forRef, node, output string
	var watch bool
	var limit int
	cmd := &cobra.Command{
		Use:   "events",
		Short: "Print the cluster's event timeline, oldest first",
		Long: `Print what happened, oldest first: boards going NotReady or dead, pods
lost, created, bound, started and ready, endpoints updated, scheduling
failures, fencing, leader elections. The leader records them; the store
keeps the newest 1000.`,
		Example: `  herdctl events -w
  herdctl events --for pod/web-x4k2p
  herdctl events --node b2 -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := newEventFilter(forRef, node)
			if err != nil {
				return err
			}
			if output != outTable && output != outJSON {
				return usagef("-o %q: want table or json", output)
			}
			if limit < 0 {
				return usagef("--limit %d: want 0 (all) or more", limit)
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			ctx, cancel := a.streamContext(cmd, watch)
			defer cancel()
			p := &eventPrinter{w: a.stdout, json: output == outJSON}
			return followEvents(ctx, c, f, limit, watch, p)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&forRef, "for", "", "only the events of one object, as KIND/NAME (pod/web-x4k2p, node/b2)")
	fl.StringVar(&node, "node", "", "only the events concerning one board")
	fl.BoolVarP(&watch, "watch", "w", false, "after printing, print events as they are recorded")
	fl.IntVar(&limit, "limit", 0, "print only the newest N of the recorded events (0: all)")
	fl.StringVarP(&output, "output", "o", outTable, "output format: table or json (one event per line)")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{outTable, outJSON}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// eventFilter picks events by object and board.
type eventFilter struct {
	sel map[string]string
}

func newEventFilter(forRef, node string) (eventFilter, error) {
	f := eventFilter{sel: map[string]string{}}
	if forRef != "" {
		kind, names, err := splitKindName([]string{forRef})
		if err != nil || len(names) != 1 {
			return f, usagef("--for %q: want KIND/NAME, e.g. pod/web-x4k2p", forRef)
		}
		if err := api.ValidateName(names[0]); err != nil {
			return f, usagef("--for %q: %v", forRef, err)
		}
		f.sel = api.OwnerRef{Kind: kind, Name: names[0]}.EventSelector()
	}
	if node != "" {
		if err := api.ValidateName(node); err != nil {
			return f, usagef("--node %q: %v", node, err)
		}
		f.sel[api.EventLabelNode] = node
	}
	return f, nil
}

// match: no filter matches every event.
func (f eventFilter) match(raw api.RawObject) bool {
	return len(f.sel) == 0 || api.MatchLabels(f.sel, raw.Metadata.Labels)
}

// listEvents returns the recorded events that f matches, oldest first, and
// the resourceVersion to watch from.
func listEvents(ctx context.Context, c apiClient, f eventFilter) ([]*api.Event, uint64, error) {
	raws, rv, err := c.List(ctx, api.KindEvent)
	if err != nil {
		return nil, 0, err
	}
	var out []*api.Event
	for _, raw := range raws {
		if !f.match(raw) {
			continue
		}
		if e, err := decodeEvent(raw); err == nil {
			out = append(out, e)
		}
	}
	sortEvents(out)
	return out, rv, nil
}

func decodeEvent(raw api.RawObject) (*api.Event, error) {
	o, err := api.FromRaw(raw)
	if err != nil {
		return nil, err
	}
	e, ok := o.(*api.Event)
	if !ok {
		return nil, fmt.Errorf("%s/%s is not an event", raw.Kind, raw.Metadata.Name)
	}
	return e, nil
}

// sortEvents orders events by time, then name (the order they were
// recorded in).
func sortEvents(evs []*api.Event) {
	slices.SortStableFunc(evs, func(a, b *api.Event) int {
		if c := a.Spec.Time.Compare(b.Spec.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Metadata.Name, b.Metadata.Name)
	})
}

// followEvents prints the newest limit matching events and, with watch,
// every one recorded after them until ctx ends.
func followEvents(ctx context.Context, c apiClient, f eventFilter, limit int, watch bool, p *eventPrinter) error {
	seen := map[string]bool{}
	for first := true; ; first = false {
		evs, rv, err := listEvents(ctx, c, f)
		if err != nil {
			if !first && ctx.Err() != nil {
				return nil
			}
			return err
		}
		if first && limit > 0 && len(evs) > limit {
			evs = evs[len(evs)-limit:]
		}
		var fresh []*api.Event
		for _, e := range evs {
			if !seen[e.Metadata.Name] {
				seen[e.Metadata.Name] = true
				fresh = append(fresh, e)
			}
		}
		p.print(fresh...)
		if first && len(evs) == 0 && !watch && !p.json {
			fmt.Fprintln(p.w, "No events found.")
		}
		if !watch {
			return nil
		}
		end, err := watchEvents(ctx, c, api.KindEvent, rv, func(ev api.WatchEvent) (bool, error) {
			if ev.Type != api.EventAdded || !f.match(ev.Object) || seen[ev.Object.Metadata.Name] {
				return false, nil
			}
			e, err := decodeEvent(ev.Object)
			if err != nil {
				return false, nil
			}
			seen[e.Metadata.Name] = true
			p.print(e)
			return false, nil
		})
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		if end == watchBroken {
			if err := sleepCtx(ctx, eventsWatchRetry); err != nil {
				return nil
			}
		}
	}
}

// eventPrinter prints events as a timeline: a table with growing columns,
// or one JSON object per line.
type eventPrinter struct {
	w      io.Writer
	json   bool
	widths []int
}

var eventsHeader = []string{"TIME", "TYPE", "REASON", "OBJECT", "NODE", "MESSAGE"}

// print prints evs, as one aligned table the first time.
func (p *eventPrinter) print(evs ...*api.Event) {
	if len(evs) == 0 {
		return
	}
	if p.json {
		for _, e := range evs {
			if b, err := json.Marshal(e); err == nil {
				fmt.Fprintf(p.w, "%s\n", b)
			}
		}
		return
	}
	t := &table{Header: eventsHeader}
	for _, e := range evs {
		t.Rows = append(t.Rows, eventRow(e))
	}
	noHeader := p.widths != nil
	p.widths = t.widths(p.widths)
	t.write(p.w, p.widths, noHeader)
}

// eventRow is one event in the timeline; the time in the laptop's zone to
// the millisecond, so a failover can be read off it.
func eventRow(e *api.Event) []string {
	return []string{
		e.Spec.Time.Local().Format("15:04:05.000"),
		e.Spec.Type,
		e.Spec.Reason,
		e.Spec.Object.String(),
		orNone(e.Spec.Node),
		e.Spec.Message,
	}
}
