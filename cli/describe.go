package cli

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"golang.org/x/crypto/ssh"

	"github.com/herd-dev/herd/api"
)

func (a *app) describeCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "describe KIND NAME",
		Short: "Show one object in detail",
		Long: `Show one object in detail: metadata, spec, status and conditions. A
deployment or daemon also lists its pods; a node lists the pods placed on it.`,
		Example: `  herdctl describe deploy web
  herdctl describe node/pi1`,
		Args:              argsBetween(1, 2),
		ValidArgsFunction: a.kindThenNames(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, name, err := getArgs(args)
			if err != nil {
				return err
			}
			if name == "" {
				return usagef("describe: missing NAME")
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
			raw.Kind = kind
			o, err := api.FromRaw(raw)
			if err != nil {
				return err
			}
			var pods []*api.Pod
			if kind == api.KindDeployment || kind == api.KindDaemon || kind == api.KindNode || kind == api.KindJob {
				raws, _, err := c.List(ctx, api.KindPod)
				if err != nil {
					return fmt.Errorf("listing pods: %w", err)
				}
				for _, r := range raws {
					r.Kind = api.KindPod
					po, err := api.FromRaw(r)
					if err != nil {
						return err
					}
					p := po.(*api.Pod)
					if kind == api.KindNode && p.Spec.Node == name ||
						kind != api.KindNode && p.Spec.Owner.Kind == kind && p.Spec.Owner.Name == name {
						pods = append(pods, p)
					}
				}
			}
			// An agent from before events answers 404: show none.
			evs, _, err := listEvents(ctx, c, eventFilter{sel: api.OwnerRef{Kind: kind, Name: name}.EventSelector()})
			if err != nil && !isNotFound(err) {
				return fmt.Errorf("listing events: %w", err)
			}
			p := printer{Now: a.clock.Now(), FormatLabels: a.api.formatLabels}
			fmt.Fprint(a.stdout, p.describe(o, pods, evs))
			return nil
		},
	}
}

// descLine is one line of a describe block: "key: value" (value may span
// lines), a section title (key only), or an indented table.
type descLine struct {
	indent int
	key    string
	value  string
	table  *table
}

// descBuilder collects a describe block and aligns its values.
type descBuilder struct{ lines []descLine }

func (d *descBuilder) kv(indent int, key, value string) {
	if value == "" {
		value = none
	}
	d.lines = append(d.lines, descLine{indent: indent, key: key, value: value})
}

// opt adds key: value only when value is set.
func (d *descBuilder) opt(indent int, key, value string) {
	if value != "" {
		d.kv(indent, key, value)
	}
}

func (d *descBuilder) title(indent int, key string) {
	d.lines = append(d.lines, descLine{indent: indent, key: key, value: ""})
}

func (d *descBuilder) table(indent int, t *table) {
	d.lines = append(d.lines, descLine{indent: indent, table: t})
}

// String renders the block, every value starting in the same column.
func (d *descBuilder) String() string {
	col := 0
	for _, l := range d.lines {
		if l.table == nil && l.value != "" {
			col = max(col, 2*l.indent+utf8.RuneCountInString(l.key)+1)
		}
	}
	col += 2
	var b strings.Builder
	for _, l := range d.lines {
		pad := strings.Repeat("  ", l.indent)
		if l.table != nil {
			var tb strings.Builder
			l.table.write(&tb, l.table.widths(nil), false)
			for _, tl := range strings.SplitAfter(tb.String(), "\n") {
				if tl != "" {
					b.WriteString(pad + tl)
				}
			}
			continue
		}
		head := pad + l.key + ":"
		if l.value == "" {
			b.WriteString(head + "\n")
			continue
		}
		for i, vl := range strings.Split(l.value, "\n") {
			if i == 0 {
				b.WriteString(head + strings.Repeat(" ", col-utf8.RuneCountInString(head)))
			} else {
				b.WriteString(strings.Repeat(" ", col))
			}
			b.WriteString(vl + "\n")
		}
	}
	return b.String()
}

// describe renders o in detail; pods are those it owns (deployments,
// daemons) or that run on it (nodes), evs its events, oldest first (the
// newest describeEvents are shown).
func (p printer) describe(o api.Object, pods []*api.Pod, evs []*api.Event) string {
	d := &descBuilder{}
	p.describeMeta(d, o)
	var conds []api.Condition
	switch o := o.(type) {
	case *api.Deployment:
		conds = p.describeDeployment(d, o)
	case *api.Daemon:
		conds = p.describeDaemon(d, o)
	case *api.Pod:
		conds = p.describePod(d, o)
	case *api.Service:
		conds = p.describeService(d, o)
	case *api.Node:
		conds = p.describeNode(d, o)
	case *api.Secret:
		p.describeSecret(d, o)
	case *api.Job:
		conds = p.describeJob(d, o)
	}
	p.describeConditions(d, conds)
	switch o.(type) {
	case *api.Deployment, *api.Daemon, *api.Node, *api.Job:
		p.describePods(d, pods)
	}
	p.describeEvents(d, evs)
	return d.String()
}

// describeSecret adds a secret's keys, each with the keyed hash of its
// value and the server key it is sealed with: enough to tell whether a
// value changed, never the value.
func (p printer) describeSecret(d *descBuilder, o *api.Secret) {
	d.kv(0, "Version", api.SecretVersion(o))
	t := &table{Header: []string{"KEY", "HASH", "SEALED-WITH", "BYTES"}}
	for _, k := range o.Keys() {
		v := o.Spec.Data[k]
		// The sealed value is the plain one plus a 24-byte nonce and a
		// 16-byte tag.
		t.Rows = append(t.Rows, []string{k, v.Hash, v.KeyID, strconv.Itoa(max(0, len(v.Sealed)-40))})
	}
	d.title(0, "Data")
	d.table(1, t)
}

// describeEvents is how many of an object's events describe shows.
const describeEvents = 10

// describeEvents adds the newest of evs (oldest first) as a table.
func (p printer) describeEvents(d *descBuilder, evs []*api.Event) {
	if len(evs) == 0 {
		d.kv(0, "Events", none)
		return
	}
	if len(evs) > describeEvents {
		evs = evs[len(evs)-describeEvents:]
	}
	t := &table{Header: []string{"AGE", "TYPE", "REASON", "NODE", "MESSAGE"}}
	for _, e := range evs {
		t.Rows = append(t.Rows, []string{humanAge(e.Spec.Time, p.Now), e.Spec.Type, e.Spec.Reason, orNone(e.Spec.Node), e.Spec.Message})
	}
	d.title(0, "Events")
	d.table(1, t)
}

// describeMeta adds the fields every object has: name, kind, labels,
// creation time, generation and resource version.
func (p printer) describeMeta(d *descBuilder, o api.Object) {
	m := o.GetMeta()
	d.kv(0, "Name", m.Name)
	d.kv(0, "Kind", singular(o.GetKind()))
	d.kv(0, "Labels", p.labels(m.Labels))
	created := ""
	if !m.Created.IsZero() {
		created = fmt.Sprintf("%s (%s ago)", m.Created.UTC().Format(time.RFC3339), humanAge(m.Created, p.Now))
	}
	d.kv(0, "Created", created)
	if m.Generation != 0 {
		d.kv(0, "Generation", strconv.FormatInt(m.Generation, 10))
	}
	if m.ResourceVersion != 0 {
		d.kv(0, "Resource Version", strconv.FormatUint(m.ResourceVersion, 10))
	}
}

// describeDeployment adds a deployment's replicas, selector, strategy and template
// and returns its conditions.
func (p printer) describeDeployment(d *descBuilder, o *api.Deployment) []api.Condition {
	st := o.Status
	d.kv(0, "Replicas", fmt.Sprintf("%d desired | %d updated | %d total | %d ready | %d available",
		replicasOf(o), st.UpdatedReplicas, st.Replicas, st.ReadyReplicas, st.AvailableReplicas))
	d.kv(0, "Selector", p.labels(o.Spec.Selector))
	d.kv(0, "Strategy", fmt.Sprintf("rolling update, max surge %s, max unavailable %s",
		intOr(o.Spec.Strategy.MaxSurge, "1"), intOr(o.Spec.Strategy.MaxUnavailable, "0")))
	d.kv(0, "Revision", st.Revision)
	d.kv(0, "Observed Generation", strconv.FormatInt(st.ObservedGeneration, 10))
	if rb := o.Spec.Rebalance; rb != nil {
		state := "requested, not started"
		if rs := st.Rebalance; rs != nil && rs.ID == rb.ID {
			state = map[bool]string{true: "done", false: "in progress"}[rs.Done]
			if rs.Message != "" {
				state += ": " + rs.Message
			}
		}
		d.kv(0, "Rebalance", fmt.Sprintf("%s (%s ago)", state, humanAge(rb.Requested, p.Now)))
	}
	p.template(d, o.Spec.Template)
	return st.Conditions
}

// describeJob adds a job's schedule, policy, phase, runs and template and
// returns its conditions.
func (p printer) describeJob(d *descBuilder, o *api.Job) []api.Condition {
	st := o.Status
	sched := "none: runs once"
	if o.Spec.Schedule != "" {
		sched = o.Spec.Schedule + " (systemd OnCalendar=, on the board that holds the job)"
	}
	d.kv(0, "Schedule", sched)
	d.kv(0, "Concurrency", o.Spec.Concurrency)
	if o.Spec.Schedule == "" {
		d.kv(0, "Retries", fmt.Sprintf("%s (failed so far: %d)", intOr(o.Spec.Retries, strconv.Itoa(api.DefaultJobRetries)), st.Failures))
	}
	phase := string(st.Phase)
	if st.Message != "" {
		phase += ": " + st.Message
	}
	d.kv(0, "Status", phase)
	d.opt(0, "Pod", st.Pod)
	d.opt(0, "Board", st.Node)
	if !st.NextAttempt.IsZero() {
		d.kv(0, "Next Attempt", st.NextAttempt.UTC().Format(time.RFC3339))
	}
	d.kv(0, "Observed Generation", strconv.FormatInt(st.ObservedGeneration, 10))
	if o.Spec.Concurrency == api.ConcurrencyAllow || st.ActiveRuns > 0 {
		d.kv(0, "Runs In Progress", strconv.Itoa(st.ActiveRuns))
	}
	if len(st.Runs) == 0 {
		d.kv(0, "Runs", none)
	} else {
		// The runs of a job with concurrency allow are instances of its
		// pod's unit: say which.
		instances := slices.ContainsFunc(st.Runs, func(r api.JobRun) bool { return r.Instance != "" })
		t := &table{Header: []string{"STARTED", "EXIT", "RESULT", "DURATION", "BOARD", "POD"}}
		if instances {
			t.Header = append(t.Header, "UNIT")
		}
		for _, r := range st.Runs {
			started, took := none, none
			if !r.Start.IsZero() {
				started = r.Start.UTC().Format(time.RFC3339) + " (" + humanAge(r.Start, p.Now) + " ago)"
			}
			if !r.End.IsZero() {
				took = runDuration(r.Duration())
			}
			row := []string{started, runExit(r), orNone(r.Result), took, orNone(r.Node), r.Pod}
			if instances {
				unit := none
				if r.Instance != "" {
					unit = api.InstanceUnitName(r.Pod, r.Instance)
				}
				row = append(row, unit)
			}
			t.Rows = append(t.Rows, row)
		}
		d.title(0, "Runs")
		d.table(1, t)
	}
	p.template(d, o.Spec.Template)
	return st.Conditions
}

// describeDaemon adds a daemon's node counts and template
// and returns its conditions.
func (p printer) describeDaemon(d *descBuilder, o *api.Daemon) []api.Condition {
	st := o.Status
	d.kv(0, "Nodes", fmt.Sprintf("%d desired | %d current | %d ready", st.Desired, st.Current, st.Ready))
	d.kv(0, "Revision", st.Revision)
	d.kv(0, "Observed Generation", strconv.FormatInt(st.ObservedGeneration, 10))
	p.template(d, o.Spec.Template)
	return st.Conditions
}

// describePod adds a pod's owner, placement, state and template
// and returns its conditions.
func (p printer) describePod(d *descBuilder, o *api.Pod) []api.Condition {
	st := o.Status
	owner := ""
	if o.Spec.Owner.Name != "" {
		owner = ref(o.Spec.Owner.Kind, o.Spec.Owner.Name)
	}
	d.kv(0, "Owner", owner)
	d.kv(0, "Node", o.Spec.Node)
	d.kv(0, "Phase", string(st.Phase))
	d.kv(0, "Ready", strconv.FormatBool(st.Ready))
	d.kv(0, "Unit", st.Unit)
	d.kv(0, "IP", st.IP)
	d.kv(0, "Host Ports", formatHostPorts(o.Spec.HostPorts))
	started := ""
	if !st.StartedAt.IsZero() {
		started = fmt.Sprintf("%s (%s ago)", st.StartedAt.UTC().Format(time.RFC3339), humanAge(st.StartedAt, p.Now))
	}
	d.kv(0, "Started", started)
	d.kv(0, "Restarts", strconv.Itoa(st.Restarts))
	d.kv(0, "Revision", o.Spec.Revision)
	d.opt(0, "Message", st.Message)
	p.template(d, o.Spec.Template)
	return st.Conditions
}

// describeService adds a service's selector, ports and endpoints
// and returns its conditions.
func (p printer) describeService(d *descBuilder, o *api.Service) []api.Condition {
	d.kv(0, "Selector", p.labels(o.Spec.Selector))
	var ports []string
	for _, sp := range o.Spec.Ports {
		name := sp.Name
		if name == "" {
			name = sp.Target
		}
		line := fmt.Sprintf("%s -> pod port %s", name, sp.Target)
		if sp.Port > 0 {
			line += fmt.Sprintf(", on every board at %d/%s", sp.Port, cmp.Or(sp.Protocol, api.DefaultProtocol))
		}
		ports = append(ports, line)
	}
	d.kv(0, "Ports", strings.Join(ports, "\n"))
	if len(o.Status.Endpoints) == 0 {
		d.kv(0, "Endpoints", "")
	} else {
		d.title(0, "Endpoints")
		t := &table{Header: []string{"PORT", "ADDRESS", "POD", "NODE"}}
		for _, e := range o.Status.Endpoints {
			t.Rows = append(t.Rows, []string{e.Port, e.Address, e.Pod, e.Node})
		}
		d.table(1, t)
	}
	return o.Status.Conditions
}

// describeNode adds a node's status, addresses and facts
// and returns its conditions.
func (p printer) describeNode(d *descBuilder, o *api.Node) []api.Condition {
	st := o.Status
	status := nodeStatus(o)
	if !st.Since.IsZero() {
		status += fmt.Sprintf(" (for %s)", humanAge(st.Since, p.Now))
	}
	d.kv(0, "Status", status)
	d.kv(0, "Roles", nodeRole(o))
	if dr := o.Spec.Drain; dr != nil {
		what := "deployments' pods"
		if dr.Daemons {
			what += " and daemons' pods"
		}
		d.kv(0, "Drain", fmt.Sprintf("moving %s off, requested %s ago", what, humanAge(dr.Requested, p.Now)))
	}
	d.kv(0, "Fenced", strconv.FormatBool(st.Fenced))
	d.kv(0, "Address", st.Address)
	d.kv(0, "SSH Address", st.SSHAddress)
	d.kv(0, "Host Key", hostKeyFingerprint(st.HostKey))
	d.opt(0, "Raft Address", st.RaftAddress)
	d.kv(0, "Arch", nodeArch(st))
	d.kv(0, "Model", st.Model)
	d.kv(0, "Kernel", st.Kernel)
	d.kv(0, "Systemd", st.Systemd)
	d.kv(0, "Cgroup", nodeCgroup(st))
	cpus := ""
	if st.CPUs > 0 {
		cpus = strconv.Itoa(st.CPUs)
	}
	d.kv(0, "CPUs", cpus)
	mem := ""
	if st.MemoryBytes > 0 {
		mem = humanBytes(st.MemoryBytes)
	}
	d.kv(0, "Memory", mem)
	d.kv(0, "Devices", strings.Join(st.Devices, ", "))
	d.kv(0, "Version", st.Version)
	var warns []string
	for _, w := range st.Warnings() {
		warns = append(warns, w.Message)
	}
	d.kv(0, "Warnings", strings.Join(warns, "\n"))
	return st.Conditions
}

// describeConditions adds the conditions' table.
func (p printer) describeConditions(d *descBuilder, conds []api.Condition) {
	if len(conds) == 0 {
		d.kv(0, "Conditions", "")
	} else {
		d.title(0, "Conditions")
		t := &table{Header: []string{"TYPE", "STATUS", "REASON", "MESSAGE", "AGE"}}
		for _, c := range conds {
			age := humanAge(c.LastTransitionTime, p.Now)
			t.Rows = append(t.Rows, []string{c.Type, string(c.Status), orNone(c.Reason), orNone(c.Message), age})
		}
		d.table(1, t)
	}
}

// describePods adds the table of pods, sorted by name.
func (p printer) describePods(d *descBuilder, pods []*api.Pod) {
	if len(pods) == 0 {
		d.kv(0, "Pods", "")
		return
	}
	sort.Slice(pods, func(i, j int) bool { return pods[i].Metadata.Name < pods[j].Metadata.Name })
	d.title(0, "Pods")
	objs := make([]api.Object, len(pods))
	for i, po := range pods {
		objs[i] = po
	}
	d.table(1, p.table(api.KindPod, objs))
}

// template adds a pod template's section.
func (p printer) template(d *descBuilder, t api.PodTemplate) {
	d.title(0, "Template")
	d.kv(1, "Labels", p.labels(t.Labels))
	d.kv(1, "Exec", formatArgv(t.Exec))
	d.opt(1, "Working Dir", t.WorkingDir)
	d.opt(1, "User", t.User)
	if len(t.Env) > 0 {
		keys := make([]string, 0, len(t.Env))
		for k := range t.Env {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var env []string
		for _, k := range keys {
			env = append(env, k+"="+strconv.Quote(t.Env[k]))
		}
		d.kv(1, "Env", strings.Join(env, "\n"))
	}
	var ports []string
	for i, pt := range t.Ports {
		name := t.PortName(i)
		proto := pt.Protocol
		if proto == "" {
			proto = "tcp"
		}
		port := strconv.Itoa(pt.Port)
		if pt.Port == 0 {
			port = "any"
		}
		ports = append(ports, fmt.Sprintf("%s %s/%s", name, port, proto))
	}
	d.kv(1, "Ports", strings.Join(ports, ", "))
	var files []string
	for _, f := range t.Files {
		mode := f.Mode
		if mode == "" {
			mode = "0644"
		}
		files = append(files, fmt.Sprintf("%s (%s, %d bytes)", f.Path, mode, len(f.Content)))
	}
	d.opt(1, "Files", strings.Join(files, "\n"))
	var arts []string
	for _, a := range t.Artifacts {
		mode := a.Mode
		if mode == "" {
			mode = api.DefaultArtifactMode
		}
		arts = append(arts, fmt.Sprintf("%s (%s) from %s, sha256 %s", a.Path, mode, a.URL, a.SHA256))
	}
	d.opt(1, "Artifacts", strings.Join(arts, "\n"))
	var res []string
	r := t.Resources
	for _, x := range [][2]string{{"memory limit", r.MemoryLimit}, {"memory request", r.MemoryRequest}, {"cpu limit", r.CPULimit}, {"cpu request", r.CPURequest}} {
		if x[1] != "" {
			res = append(res, x[0]+" "+x[1])
		}
	}
	if r.AllowUnenforcedLimits {
		res = append(res, "allowed unenforced")
	}
	d.opt(1, "Resources", strings.Join(res, ", "))
	restart := string(t.RestartPolicy)
	if restart == "" {
		restart = string(api.RestartAlways)
	}
	d.kv(1, "Restart", restart)
	d.opt(1, "Readiness", formatProbe(t.Readiness))
	d.opt(1, "Node Selector", p.labels(t.NodeSelector))
	d.opt(1, "Devices", strings.Join(t.Devices, ", "))
	d.opt(1, "Secrets", strings.Join(t.Secrets, ", "))
}

// formatProbe renders a readiness probe in one line.
func formatProbe(pr *api.Probe) string {
	if pr == nil {
		return ""
	}
	var s string
	switch {
	case pr.HTTP != "":
		port := pr.HTTPPort
		if port == "" {
			port = "first port"
		} else {
			port = "port " + port
		}
		s = fmt.Sprintf("http GET %s on %s", pr.HTTP, port)
	case pr.TCP != "":
		s = "tcp connect to port " + pr.TCP
	case len(pr.Exec) > 0:
		s = "exec " + formatArgv(pr.Exec)
	default:
		s = "(empty)"
	}
	period, timeout := pr.PeriodSeconds, pr.TimeoutSeconds
	if period == 0 {
		period = 5
	}
	if timeout == 0 {
		timeout = 2
	}
	return fmt.Sprintf("%s every %ds, timeout %ds", s, period, timeout)
}

func formatHostPorts(hp map[string]int) string {
	keys := make([]string, 0, len(hp))
	for k := range hp {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, hp[k])
	}
	return strings.Join(parts, ", ")
}

func intOr(p *int, def string) string {
	if p == nil {
		return def
	}
	return strconv.Itoa(*p)
}

// hostKeyFingerprint shows an authorized_keys line as "type SHA256:...".
func hostKeyFingerprint(key string) string {
	if key == "" {
		return ""
	}
	pk, _, _, _, err := ssh.ParseAuthorizedKey([]byte(key))
	if err != nil {
		if len(key) > 40 {
			key = key[:40] + "..."
		}
		return key + " (unparsable)"
	}
	return pk.Type() + " " + ssh.FingerprintSHA256(pk)
}
