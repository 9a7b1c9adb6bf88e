package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/herd-dev/herd/api"
)

func (a *app) diffCmd() *cobra.Command {
	var files []string
	cmd := &cobra.Command{
		Use:   "diff -f PATH",
		Short: "Show what apply would change",
		Long: `Show what "herdctl apply" would change, field by field, without changing
anything: the server applies the manifests in a dry run and herdctl compares
the labels and spec it would store with what is stored now.

  + field: value         added
  - field: value         removed
  ~ field: old -> new    changed`,
		Args:              argsBetween(0, 0),
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ms, err := a.loadAndValidate(files)
			if err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			ctx, cancel := a.cmdContext(cmd, defaultRequestTimeout)
			defer cancel()
			results, err := c.Apply(ctx, objectsOf(ms), true)
			if err != nil {
				return err
			}
			local := map[string]api.Object{}
			for _, m := range ms {
				local[ref(m.Object.GetKind(), m.Object.GetMeta().Name)] = m.Object
			}
			changed := 0
			for _, r := range results {
				if r.Action == api.ApplyUnchanged {
					continue
				}
				changed++
				key := ref(r.Kind, r.Name)
				want := r.Object
				if len(want.Spec) == 0 {
					// The server did not return the object: compare the
					// manifest as written.
					if o, ok := local[key]; ok {
						if want, err = api.ToRaw(o); err != nil {
							return err
						}
					}
				}
				var live *api.RawObject
				if r.Action != api.ApplyCreated {
					got, err := c.Get(ctx, r.Kind, r.Name)
					switch {
					case isNotFound(err):
					case err != nil:
						return err
					default:
						live = &got
					}
				}
				lines, err := diffObjects(live, &want)
				if err != nil {
					return fmt.Errorf("%s: %w", key, err)
				}
				fmt.Fprintf(a.stdout, "%s %s\n", key, r.Action)
				if len(lines) == 0 && r.Action != api.ApplyCreated {
					fmt.Fprintln(a.stdout, "  (no label or spec changes)")
				}
				for _, l := range lines {
					fmt.Fprintf(a.stdout, "  %s\n", l)
				}
			}
			if changed == 0 {
				fmt.Fprintln(a.stdout, "No changes.")
			}
			return nil
		},
	}
	addFileFlag(cmd, &files, "manifests to compare")
	return cmd
}

// diffObjects compares the labels and spec of live (nil: not stored) and
// want, and returns one line per changed leaf field, in field order:
// "+ path: value", "- path: value" or "~ path: old -> new".
func diffObjects(live, want *api.RawObject) ([]string, error) {
	a, err := comparable(live)
	if err != nil {
		return nil, err
	}
	b, err := comparable(want)
	if err != nil {
		return nil, err
	}
	var lines []string
	diffValue("", a, b, &lines)
	return lines, nil
}

// comparable is the part of o that diff compares, as generic JSON.
func comparable(o *api.RawObject) (any, error) {
	if o == nil {
		return nil, nil
	}
	m := map[string]any{}
	if len(o.Metadata.Labels) > 0 {
		labels := map[string]any{}
		for k, v := range o.Metadata.Labels {
			labels[k] = v
		}
		m["metadata"] = map[string]any{"labels": labels}
	}
	if len(o.Spec) > 0 {
		dec := json.NewDecoder(bytes.NewReader(o.Spec))
		dec.UseNumber()
		var spec any
		if err := dec.Decode(&spec); err != nil {
			return nil, fmt.Errorf("spec: %w", err)
		}
		m["spec"] = spec
	}
	return m, nil
}

// diffValue appends the differences between a and b at path; nil means
// absent.
func diffValue(path string, a, b any, lines *[]string) {
	am, aIsMap := a.(map[string]any)
	bm, bIsMap := b.(map[string]any)
	if aIsMap && bIsMap || (aIsMap && b == nil) || (a == nil && bIsMap) {
		keys := map[string]bool{}
		for k := range am {
			keys[k] = true
		}
		for k := range bm {
			keys[k] = true
		}
		sorted := make([]string, 0, len(keys))
		for k := range keys {
			sorted = append(sorted, k)
		}
		sort.Strings(sorted)
		for _, k := range sorted {
			diffValue(joinKey(path, k), am[k], bm[k], lines)
		}
		return
	}
	as, aIsList := a.([]any)
	bs, bIsList := b.([]any)
	if aIsList && bIsList || (aIsList && b == nil) || (a == nil && bIsList) {
		for i := 0; i < max(len(as), len(bs)); i++ {
			var x, y any
			if i < len(as) {
				x = as[i]
			}
			if i < len(bs) {
				y = bs[i]
			}
			diffValue(path+"["+strconv.Itoa(i)+"]", x, y, lines)
		}
		return
	}
	switch {
	case a == nil && b == nil:
	case a == nil:
		*lines = append(*lines, fmt.Sprintf("+ %s: %s", path, jsonText(b)))
	case b == nil:
		*lines = append(*lines, fmt.Sprintf("- %s: %s", path, jsonText(a)))
	default:
		if x, y := jsonText(a), jsonText(b); x != y {
			*lines = append(*lines, fmt.Sprintf("~ %s: %s -> %s", path, x, y))
		}
	}
}

// joinKey appends a map key to a field path: .key, or ["key"] when the key
// is not a plain identifier (label keys such as herd.dev/arch).
func joinKey(path, k string) string {
	if isPlainKey(k) {
		if path == "" {
			return k
		}
		return path + "." + k
	}
	return path + "[" + strconv.Quote(k) + "]"
}

// jsonText renders a leaf value as compact JSON, with <, > and & as
// written (not escaped for HTML).
func jsonText(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// isPlainKey reports whether k matches [A-Za-z_][A-Za-z0-9_-]*.
func isPlainKey(k string) bool {
	if k == "" {
		return false
	}
	for i, r := range k {
		switch {
		case r == '_', r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		case i > 0 && (r == '-' || r >= '0' && r <= '9'):
		default:
			return false
		}
	}
	return true
}
