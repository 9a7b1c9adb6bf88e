package api

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Rollout history: the rule for status.history of deployments and daemons,
// which their controllers apply (RecordRevision) and `herdctl rollout
// undo` reads (UndoTarget).
const (
	// RevisionHistoryLimit is how many templates a history keeps, the
	// current one included.
	RevisionHistoryLimit = 10
	// MaxHistoryTemplateBytes bounds the templates a history keeps,
	// together, as TemplateBytes counts them. An entry whose template does
	// not fit keeps its number, hash, generation and time but not the
	// template (it cannot be undone to). The bound keeps a status write,
	// which shares a Raft transaction with the pass's creates (half of
	// MaxBindTxnBytes), well inside the transaction, and what each status
	// write costs the boards' SD cards small: a 1 KiB template costs at
	// most 10 KiB per write.
	MaxHistoryTemplateBytes = 128 << 10
)

// TemplateRevision is one entry of a deployment's or daemon's rollout
// history: a pod template it ran.
type TemplateRevision struct {
	// Revision numbers the entry, like kubectl's REVISION column: 1 for the
	// first template recorded, then one more than the highest number in
	// the history. It only grows: a template applied again gets a new
	// number, its old entry is dropped.
	Revision int64 `json:"revision"`
	// Hash is TemplateHash of the template: the spec.revision of the pods
	// made from it.
	Hash string `json:"hash"`
	// Generation is the owner's metadata.generation when the template was
	// first observed.
	Generation int64 `json:"generation,omitempty"`
	// Applied is when the controller first observed the template (the
	// leader's clock).
	Applied time.Time `json:"applied,omitzero"`
	// Template is the template as stored (defaulted); nil when it did not
	// fit MaxHistoryTemplateBytes.
	Template *PodTemplate `json:"template,omitempty"`
}

// RecordRevision returns history with t current: t's entry first. history
// is newest first, as RecordRevision leaves it; hash is TemplateHash(t),
// generation the owner's metadata.generation and now the time the template
// is observed.
//
//   - When t is already first, history is returned as it is (the same
//     slice), so a controller writes status only when the template
//     changes.
//   - Otherwise t gets a new entry in front, numbered one more than the
//     highest number in history, and an older entry with the same hash (a
//     template applied again, or undone to) is dropped: kubectl's rule.
//   - At most RevisionHistoryLimit entries are kept, the newest; then,
//     newest first, each entry keeps its template only while the templates
//     kept so far fit MaxHistoryTemplateBytes.
//
// history is not modified.
func RecordRevision(history []TemplateRevision, t PodTemplate, hash string, generation int64, now time.Time) []TemplateRevision {
	if len(history) > 0 && history[0].Hash == hash {
		return history
	}
	var next int64 = 1
	for _, e := range history {
		next = max(next, e.Revision+1)
	}
	tc := t.DeepCopy()
	out := make([]TemplateRevision, 0, min(len(history)+1, RevisionHistoryLimit))
	out = append(out, TemplateRevision{Revision: next, Hash: hash, Generation: generation, Applied: now, Template: &tc})
	for _, e := range history {
		if len(out) == RevisionHistoryLimit {
			break
		}
		if e.Hash != hash {
			out = append(out, e)
		}
	}
	budget := MaxHistoryTemplateBytes
	for i := range out {
		if out[i].Template == nil {
			continue
		}
		if n := TemplateBytes(out[i].Template); n <= budget {
			budget -= n
		} else {
			out[i].Template = nil // out[i] is a copy: history keeps its template
		}
	}
	return out
}

// FindRevision returns the entry numbered revision, or nil.
func FindRevision(history []TemplateRevision, revision int64) *TemplateRevision {
	for i := range history {
		if history[i].Revision == revision {
			return &history[i]
		}
	}
	return nil
}

// UndoTarget picks the entry `herdctl rollout undo` goes back to: with
// toRevision 0 the newest entry whose hash is not current (the hash of the
// stored template, which the history may not have recorded yet), else the
// entry numbered toRevision. It is an error when there is no such entry,
// when it is the current template, or when its template was not kept.
func UndoTarget(history []TemplateRevision, current string, toRevision int64) (TemplateRevision, error) {
	if toRevision < 0 {
		return TemplateRevision{}, fmt.Errorf("revision %d: revisions are numbered from 1", toRevision)
	}
	if len(history) == 0 {
		return TemplateRevision{}, fmt.Errorf("no rollout history yet: it is recorded once the controller observes the template (agents older than the history keep none)")
	}
	var target *TemplateRevision
	if toRevision == 0 {
		for i := range history {
			if history[i].Hash != current {
				target = &history[i]
				break
			}
		}
		if target == nil {
			return TemplateRevision{}, fmt.Errorf("no previous revision: the history holds only the current template (revision %d)", history[0].Revision)
		}
	} else {
		target = FindRevision(history, toRevision)
		if target == nil {
			return TemplateRevision{}, fmt.Errorf("revision %d not found in the history (revisions %s)", toRevision, revisionList(history))
		}
		if target.Hash == current {
			return TemplateRevision{}, fmt.Errorf("revision %d (%s) is the current template: nothing to undo", toRevision, target.Hash)
		}
	}
	if target.Template == nil {
		return TemplateRevision{}, fmt.Errorf("revision %d (%s): its template was not kept (the history keeps at most %d bytes of templates)", target.Revision, target.Hash, MaxHistoryTemplateBytes)
	}
	return *target, nil
}

// revisionList is "1, 3, 4": the history's numbers, ascending.
func revisionList(history []TemplateRevision) string {
	nums := make([]int64, len(history))
	for i, e := range history {
		nums[i] = e.Revision
	}
	slices.Sort(nums)
	s := make([]string, len(nums))
	for i, n := range nums {
		s[i] = strconv.FormatInt(n, 10)
	}
	return strings.Join(s, ", ")
}
