package api

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var hist0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// histTemplate returns a template whose exec names v.
func histTemplate(v string) PodTemplate {
	return PodTemplate{Labels: map[string]string{"app": "web"}, Exec: []string{"/usr/bin/web", "--" + v}}
}

// summaryOf is "rev:exec-flag" per entry, "rev:exec-flag-" when the
// template was not kept.
func summaryOf(h []TemplateRevision) []string {
	var out []string
	for _, e := range h {
		s := strings.TrimPrefix(e.Hash, "h-")
		if e.Template == nil {
			s += "-"
		}
		out = append(out, strconv.FormatInt(e.Revision, 10)+":"+s)
	}
	return out
}

// applyAll records the templates named by vs in turn, one generation and
// one minute apart; hashes are "h-<v>" so the summary stays readable.
func applyAll(h []TemplateRevision, vs ...string) []TemplateRevision {
	for _, v := range vs {
		gen := int64(1)
		if len(h) > 0 {
			gen = h[0].Generation + 1
		}
		h = RecordRevision(h, histTemplate(v), "h-"+v, gen, hist0.Add(time.Duration(gen)*time.Minute))
	}
	return h
}

func TestRecordRevision(t *testing.T) {
	tests := []struct {
		name    string
		applied []string
		want    []string
	}{
		{"first template is revision 1", []string{"a"}, []string{"1:a"}},
		{"new templates go in front", []string{"a", "b", "c"}, []string{"3:c", "2:b", "1:a"}},
		{"same template again changes nothing", []string{"a", "b", "b"}, []string{"2:b", "1:a"}},
		{"an old template applied again moves to the front with a new number", []string{"a", "b", "c", "a"}, []string{"4:a", "3:c", "2:b"}},
		{"undo to the previous one", []string{"a", "b", "a", "b"}, []string{"4:b", "3:a"}},
		{"bounded to the newest ten", []string{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "x", "y"},
			[]string{"12:y", "11:x", "10:9", "9:8", "8:7", "7:6", "6:5", "5:4", "4:3", "3:2"}},
		{"numbers keep growing past the bound", []string{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "x", "3"},
			[]string{"12:3", "11:x", "10:9", "9:8", "8:7", "7:6", "6:5", "5:4", "3:2", "2:1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := applyAll(nil, tt.applied...)
			if diff := cmp.Diff(tt.want, summaryOf(h)); diff != "" {
				t.Errorf("history (-want +got):\n%s", diff)
			}
			if len(h) > RevisionHistoryLimit {
				t.Errorf("%d entries, limit %d", len(h), RevisionHistoryLimit)
			}
			last := tt.applied[len(tt.applied)-1]
			if h[0].Template == nil || !cmp.Equal(*h[0].Template, histTemplate(last)) {
				t.Errorf("current entry's template = %+v, want %+v", h[0].Template, histTemplate(last))
			}
		})
	}
}

func TestRecordRevisionKeepsInput(t *testing.T) {
	h := applyAll(nil, "a", "b")
	before := summaryOf(h)
	tpl := h[1].Template
	again := RecordRevision(h, histTemplate("b"), "h-b", 9, hist0.Add(time.Hour))
	if &again[0] != &h[0] {
		t.Error("recording the current template again returned a new slice: the controller would write status")
	}
	if again[0].Generation != 2 || !again[0].Applied.Equal(hist0.Add(2*time.Minute)) {
		t.Errorf("current entry changed: %+v", again[0])
	}
	moved := RecordRevision(h, histTemplate("a"), "h-a", 3, hist0.Add(time.Hour))
	if diff := cmp.Diff(before, summaryOf(h)); diff != "" || h[1].Template != tpl {
		t.Errorf("input modified (-before +after):\n%s", diff)
	}
	if got := moved[0]; got.Revision != 3 || got.Generation != 3 || !got.Applied.Equal(hist0.Add(time.Hour)) {
		t.Errorf("moved entry = %+v, want revision 3, generation 3, applied at the new time", got)
	}
}

func TestRecordRevisionByteBudget(t *testing.T) {
	big := func(v string) PodTemplate {
		p := histTemplate(v)
		p.Files = []File{{Path: "/etc/web.conf", Content: strings.Repeat("x", 50<<10)}}
		return p
	}
	var h []TemplateRevision
	for i, v := range []string{"a", "b", "c", "d"} {
		h = RecordRevision(h, big(v), "h-"+v, int64(i+1), hist0)
	}
	// 50 KiB each: two fit in 128 KiB, the older ones keep their entry only.
	if diff := cmp.Diff([]string{"4:d", "3:c", "2:b-", "1:a-"}, summaryOf(h)); diff != "" {
		t.Errorf("history (-want +got):\n%s", diff)
	}
	// A small template after the big ones is kept: the budget skips, it
	// does not stop.
	h = RecordRevision(h, histTemplate("e"), "h-e", 5, hist0)
	if diff := cmp.Diff([]string{"5:e", "4:d", "3:c", "2:b-", "1:a-"}, summaryOf(h)); diff != "" {
		t.Errorf("history (-want +got):\n%s", diff)
	}
	huge := histTemplate("f")
	huge.Files = []File{{Path: "/etc/web.conf", Content: strings.Repeat("x", MaxHistoryTemplateBytes)}}
	h = RecordRevision(h, huge, "h-f", 6, hist0)
	if h[0].Template != nil || h[1].Template == nil {
		t.Errorf("a template over the whole budget: current kept %v, previous kept %v; want only the previous",
			h[0].Template != nil, h[1].Template != nil)
	}
	kept := 0
	for _, e := range h {
		if e.Template != nil {
			kept += TemplateBytes(e.Template)
		}
	}
	if kept > MaxHistoryTemplateBytes {
		t.Errorf("history keeps %d bytes of templates, budget %d", kept, MaxHistoryTemplateBytes)
	}
}

func TestUndoTarget(t *testing.T) {
	h := applyAll(nil, "a", "b", "c") // 3:c 2:b 1:a
	noTemplate := applyAll(nil, "a", "b")
	noTemplate[1].Template = nil
	tests := []struct {
		name    string
		history []TemplateRevision
		current string
		to      int64
		want    int64  // revision picked
		wantErr string // substring
	}{
		{name: "previous revision", history: h, current: "h-c", want: 2},
		{name: "explicit revision", history: h, current: "h-c", to: 1, want: 1},
		{name: "spec changed before the history caught up", history: h, current: "h-new", want: 3},
		{name: "previous skips the current template wherever it is", history: h, current: "h-b", want: 3},
		{name: "unknown revision", history: h, current: "h-c", to: 7, wantErr: "revision 7 not found in the history (revisions 1, 2, 3)"},
		{name: "already current", history: h, current: "h-c", to: 3, wantErr: "revision 3 (h-c) is the current template"},
		{name: "only the current template", history: applyAll(nil, "a"), current: "h-a", wantErr: "no previous revision"},
		{name: "no history", current: "h-a", wantErr: "no rollout history yet"},
		{name: "negative", history: h, current: "h-c", to: -1, wantErr: "numbered from 1"},
		{name: "template not kept", history: noTemplate, current: "h-b", wantErr: "revision 1 (h-a): its template was not kept"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := UndoTarget(tt.history, tt.current, tt.to)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Revision != tt.want || got.Template == nil {
				t.Errorf("picked revision %d (template %v), want %d", got.Revision, got.Template, tt.want)
			}
		})
	}
}
