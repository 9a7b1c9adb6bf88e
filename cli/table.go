package cli

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/herd-dev/herd/api"
)

// none is printed for an empty cell.
const none = "<none>"

// table is a header and rows of cells, printed in aligned columns.
type table struct {
	Header []string
	Rows   [][]string
}

// widths returns each column's width, at least min's.
func (t *table) widths(min []int) []int {
	w := make([]int, len(t.Header))
	copy(w, min)
	grow := func(row []string) {
		for i, c := range row {
			if i < len(w) {
				w[i] = max(w[i], utf8.RuneCountInString(c))
			}
		}
	}
	grow(t.Header)
	for _, r := range t.Rows {
		grow(r)
	}
	return w
}

// write prints the header (unless noHeader) and rows, columns separated by
// three spaces, with column widths w (see widths).
func (t *table) write(out io.Writer, w []int, noHeader bool) {
	line := func(row []string) {
		var b strings.Builder
		for i, c := range row {
			if i == len(row)-1 {
				b.WriteString(c)
				break
			}
			b.WriteString(c)
			b.WriteString(strings.Repeat(" ", w[i]-utf8.RuneCountInString(c)+3))
		}
		io.WriteString(out, strings.TrimRight(b.String(), " ")+"\n")
	}
	if !noHeader {
		line(t.Header)
	}
	for _, r := range t.Rows {
		line(r)
	}
}

// String renders the whole table.
func (t *table) String() string {
	var b strings.Builder
	t.write(&b, t.widths(nil), false)
	return b.String()
}

// printer renders objects as herdctl shows them. It is pure: the same
// objects and Now give the same text.
type printer struct {
	Now          time.Time
	Wide         bool
	FormatLabels func(map[string]string) string
}

// header returns the column names for kind.
func (p printer) header(kind api.Kind) []string {
	switch kind {
	case api.KindDeployment:
		h := []string{"NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"}
		if p.Wide {
			h = append(h, "REVISION", "SELECTOR", "EXEC")
		}
		return h
	case api.KindDaemon:
		h := []string{"NAME", "DESIRED", "CURRENT", "READY", "AGE"}
		if p.Wide {
			h = append(h, "REVISION", "NODE-SELECTOR", "EXEC")
		}
		return h
	case api.KindPod:
		h := []string{"NAME", "NODE", "PHASE", "RESTARTS", "AGE"}
		if p.Wide {
			h = append(h, "UNIT", "IP", "REVISION")
		}
		return h
	case api.KindService:
		h := []string{"NAME", "SELECTOR", "ENDPOINTS", "PORTS", "AGE"}
		if p.Wide {
			h = append(h, "TARGETS")
		}
		return h
	case api.KindJob:
		h := []string{"NAME", "SCHEDULE", "STATUS", "LAST RUN", "EXIT", "DURATION", "BOARD", "AGE"}
		if p.Wide {
			h = append(h, "RUNS", "FAILURES", "POD", "EXEC")
		}
		return h
	case api.KindNode:
		h := []string{"NAME", "STATUS", "ROLES", "ADDRESS", "ARCH", "AGE"}
		if p.Wide {
			h = append(h, "MODEL", "VARIANT", "KERNEL", "SYSTEMD", "CGROUP", "CPUS", "MEMORY", "DEVICES", "VERSION", "WARNINGS")
		}
		return h
	case api.KindSecret:
		return []string{"NAME", "KEYS", "AGE"}
	}
	return []string{"NAME", "AGE"}
}

// row returns o's cells, matching header(o.GetKind()).
func (p printer) row(o api.Object) []string {
	m := o.GetMeta()
	age := humanAge(m.Created, p.Now)
	switch o := o.(type) {
	case *api.Deployment:
		want := replicasOf(o)
		r := []string{m.Name,
			fmt.Sprintf("%d/%d", o.Status.ReadyReplicas, want),
			strconv.Itoa(o.Status.UpdatedReplicas),
			strconv.Itoa(o.Status.AvailableReplicas),
			age}
		if p.Wide {
			r = append(r, orNone(o.Status.Revision), orNone(p.labels(o.Spec.Selector)), orNone(formatArgv(o.Spec.Template.Exec)))
		}
		return r
	case *api.Daemon:
		r := []string{m.Name,
			strconv.Itoa(o.Status.Desired),
			strconv.Itoa(o.Status.Current),
			strconv.Itoa(o.Status.Ready),
			age}
		if p.Wide {
			r = append(r, orNone(o.Status.Revision), orNone(p.labels(o.Spec.Template.NodeSelector)), orNone(formatArgv(o.Spec.Template.Exec)))
		}
		return r
	case *api.Secret:
		// Key names only: values are never shown (and never reach herdctl
		// but sealed).
		return []string{m.Name, orNone(strings.Join(o.Keys(), ",")), age}
	case *api.Pod:
		r := []string{m.Name, orNone(o.Spec.Node), orNone(string(o.Status.Phase)), strconv.Itoa(o.Status.Restarts), age}
		if p.Wide {
			r = append(r, orNone(o.Status.Unit), orNone(o.Status.IP), orNone(o.Spec.Revision))
		}
		return r
	case *api.Service:
		var proxies []string
		for _, c := range o.ProxyPorts() {
			proxies = append(proxies, c.String())
		}
		r := []string{m.Name, orNone(p.labels(o.Spec.Selector)), endpointsSummary(o.Status.Endpoints), orNone(strings.Join(proxies, ",")), age}
		if p.Wide {
			var ports []string
			for _, sp := range o.Spec.Ports {
				if sp.Name != "" && sp.Name != sp.Target {
					ports = append(ports, sp.Name+"->"+sp.Target)
				} else {
					ports = append(ports, sp.Target)
				}
			}
			r = append(r, orNone(strings.Join(ports, ",")))
		}
		return r
	case *api.Job:
		st := &o.Status
		lastRun, exit, took, board := none, none, none, orNone(st.Node)
		if len(st.Runs) > 0 {
			r := st.Runs[0]
			lastRun = humanAge(r.Start, p.Now) + " ago"
			exit = runExit(r)
			if !r.End.IsZero() {
				took = runDuration(r.Duration())
			}
			if board == none {
				board = orNone(r.Node)
			}
		}
		status := orNone(string(st.Phase))
		if st.ActiveRuns > 0 {
			// Runs of a job with concurrency allow, side by side.
			status += fmt.Sprintf(" (%d running)", st.ActiveRuns)
		}
		r := []string{m.Name, orNone(o.Spec.Schedule), status, lastRun, exit, took, board, age}
		if p.Wide {
			pod := st.Pod
			if pod == "" && len(st.Runs) > 0 {
				pod = st.Runs[0].Pod
			}
			r = append(r, strconv.Itoa(len(st.Runs)), strconv.Itoa(st.Failures), orNone(pod), orNone(formatArgv(o.Spec.Template.Exec)))
		}
		return r
	case *api.Node:
		r := []string{m.Name, nodeStatus(o), nodeRole(o), orNone(o.Status.Address), orNone(o.Status.Arch), age}
		if p.Wide {
			cpus := none
			if o.Status.CPUs > 0 {
				cpus = strconv.Itoa(o.Status.CPUs)
			}
			st := &o.Status
			var warns []string
			for _, w := range st.Warnings() {
				warns = append(warns, w.Short)
			}
			r = append(r, orNone(st.Model), orNone(st.ArchVariant), orNone(st.Kernel), orNone(st.Systemd), orNone(st.Cgroup),
				cpus, humanBytes(st.MemoryBytes), orNone(deviceSummary(st.Devices)), orNone(st.Version), orNone(strings.Join(warns, ",")))
		}
		return r
	}
	return []string{m.Name, age}
}

// runDuration is a run's duration as get and describe show it: like
// AGE, but a run under a second in milliseconds ("12ms").
func runDuration(d time.Duration) string {
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	return humanDuration(d)
}

// runExit is a run's end as get and describe show it: "0", "3", "signal
// 9", "lost".
func runExit(r api.JobRun) string {
	switch r.Result {
	case "", "success", "exit-code":
		return strconv.Itoa(r.ExitStatus)
	case "signal", "core-dump":
		return "signal " + strconv.Itoa(r.ExitStatus)
	}
	return r.Result
}

// table renders objs, all of kind, as a table.
func (p printer) table(kind api.Kind, objs []api.Object) *table {
	t := &table{Header: p.header(kind)}
	for _, o := range objs {
		t.Rows = append(t.Rows, p.row(o))
	}
	return t
}

func (p printer) labels(m map[string]string) string {
	if len(m) == 0 {
		return ""
	}
	return p.FormatLabels(m)
}

// replicasOf is a deployment's desired replicas; an unset count means 1,
// as the server defaults it on create.
func replicasOf(d *api.Deployment) int {
	if d.Spec.Replicas != nil {
		return *d.Spec.Replicas
	}
	return 1
}

func nodeStatus(n *api.Node) string {
	s := string(n.Status.Phase)
	if s == "" {
		s = "Unknown"
	}
	for _, c := range n.Status.Conditions {
		if c.Type == api.ConditionAgentDown && c.Status == api.ConditionTrue {
			s += ",AgentDown" // the board runs its pods; its agent is down
		}
	}
	if n.Spec.Unschedulable {
		s += ",SchedulingDisabled"
	}
	if n.Draining() {
		s += ",Draining"
	}
	return s
}

// nodeArch is Arch with the variant and kernel machine when they add
// something: "arm (armv7, aarch64 kernel)".
func nodeArch(st api.NodeStatus) string {
	var extra []string
	if st.ArchVariant != "" && st.ArchVariant != st.Arch {
		extra = append(extra, st.ArchVariant)
	}
	if st.KernelArch != "" && !(st.Arch == "arm64" && st.KernelArch == "aarch64") && !(st.Arch == "amd64" && st.KernelArch == "x86_64") {
		extra = append(extra, st.KernelArch+" kernel")
	}
	if len(extra) == 0 {
		return st.Arch
	}
	return st.Arch + " (" + strings.Join(extra, ", ") + ")"
}

// wideDevices is how many device names a wide node row lists before it
// counts the rest; describe node lists them all.
const wideDevices = 3

// deviceSummary lists a board's devices for a table cell:
// "gpiochip0,i2c-1,ttyUSB0", or the first wideDevices and a count of the
// others ("gpiochip0,gpiochip1,i2c-1,+20").
func deviceSummary(devs []string) string {
	if len(devs) <= wideDevices+1 {
		return strings.Join(devs, ",")
	}
	return strings.Join(devs[:wideDevices], ",") + ",+" + strconv.Itoa(len(devs)-wideDevices)
}

// nodeCgroup is the cgroup layout and its controllers: "v2 (cpu io pids)".
func nodeCgroup(st api.NodeStatus) string {
	if st.Cgroup == "" {
		return ""
	}
	if len(st.CgroupControllers) == 0 {
		return st.Cgroup + " (no controllers)"
	}
	return st.Cgroup + " (" + strings.Join(st.CgroupControllers, " ") + ")"
}

func nodeRole(n *api.Node) string {
	if n.Status.Server {
		return "server"
	}
	return "worker"
}

// endpointsSummary shows up to three addresses, like kubectl.
func endpointsSummary(eps []api.Endpoint) string {
	if len(eps) == 0 {
		return none
	}
	const show = 3
	var addrs []string
	for i, e := range eps {
		if i == show {
			break
		}
		addrs = append(addrs, e.Address)
	}
	s := strings.Join(addrs, ",")
	if len(eps) > show {
		s += fmt.Sprintf(" + %d more...", len(eps)-show)
	}
	return s
}

func orNone(s string) string {
	if s == "" {
		return none
	}
	return s
}

// formatArgv renders an argv for reading, quoting arguments that need it.
func formatArgv(argv []string) string {
	parts := make([]string, len(argv))
	for i, a := range argv {
		if a == "" || strings.ContainsAny(a, " \t\n\"'\\") {
			a = strconv.Quote(a)
		}
		parts[i] = a
	}
	return strings.Join(parts, " ")
}

// humanAge renders how long ago t was, kubectl style: 45s, 12m, 5h, 3d, 2y.
func humanAge(t, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return humanDuration(now.Sub(t))
}

// humanDuration renders d with one unit, rounded down.
func humanDuration(d time.Duration) string {
	switch {
	case d < -time.Second:
		return "<invalid>"
	case d < 0:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh", int(d/time.Hour))
	case d < 365*24*time.Hour:
		return fmt.Sprintf("%dd", int(d/(24*time.Hour)))
	}
	return fmt.Sprintf("%dy", int(d/(365*24*time.Hour)))
}

// humanBytes renders a size with a binary unit: 512Mi, 3.8Gi.
func humanBytes(n int64) string {
	if n <= 0 {
		return none
	}
	units := []string{"Ki", "Mi", "Gi", "Ti"}
	if n < 1024 {
		return strconv.FormatInt(n, 10)
	}
	v := float64(n)
	u := ""
	for _, s := range units {
		if v < 1024 {
			break
		}
		v /= 1024
		u = s
	}
	s := strconv.FormatFloat(v, 'f', 1, 64)
	s = strings.TrimSuffix(s, ".0")
	return s + u
}
