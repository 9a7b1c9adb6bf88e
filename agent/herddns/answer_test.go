package herddns

import (
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/miekg/dns"

	"github.com/herd-dev/herd/api"
)

func testState() State {
	node := func(name, addr string) *api.Node {
		return &api.Node{Kind: api.KindNode, Metadata: api.ObjectMeta{Name: name}, Status: api.NodeStatus{Phase: api.NodeReady, Address: addr}}
	}
	web := &api.Service{Kind: api.KindService, Metadata: api.ObjectMeta{Name: "web"},
		Spec: api.ServiceSpec{Ports: []api.ServicePort{{Name: "http", Target: "http"}}},
		Status: api.ServiceStatus{Endpoints: []api.Endpoint{
			{Port: "http", Pod: "web-a", Node: "b1", Address: "10.77.0.11:27847"},
			{Port: "http", Pod: "web-b", Node: "b3", Address: "10.77.0.13:23896"},
			{Port: "http", Pod: "web-c", Node: "b3", Address: "10.77.0.13:23001"},
		}}}
	empty := &api.Service{Kind: api.KindService, Metadata: api.ObjectMeta{Name: "idle"},
		Spec: api.ServiceSpec{Ports: []api.ServicePort{{Target: "metrics"}}}}
	return State{Services: []*api.Service{web, empty}, Nodes: []*api.Node{node("b1", "10.77.0.11"), node("b2", "10.77.0.12"), node("b3", "10.77.0.13")}}
}

// reply is what a test compares: the code and the records as text.
type reply struct {
	Rcode         string
	Answer, Extra []string
	NS            int
	AA, RA        bool
}

func ask(t *testing.T, name string, qtype uint16, st State) reply {
	t.Helper()
	q := new(dns.Msg)
	q.SetQuestion(name, qtype)
	m := Answer(q, st)
	if m.Id != q.Id || !m.Response {
		t.Errorf("%s: reply id %d response %v, want id %d, a response", name, m.Id, m.Response, q.Id)
	}
	r := reply{Rcode: dns.RcodeToString[m.Rcode], NS: len(m.Ns), AA: m.Authoritative, RA: m.RecursionAvailable}
	for _, rr := range m.Answer {
		r.Answer = append(r.Answer, rr.String())
	}
	for _, rr := range m.Extra {
		r.Extra = append(r.Extra, rr.String())
	}
	return r
}

func TestAnswer(t *testing.T) {
	st := testState()
	tests := []struct {
		name  string
		qname string
		qtype uint16
		want  reply
	}{
		{"service A: one record per board", "web.svc.herd.", dns.TypeA, reply{Rcode: "NOERROR", AA: true, Answer: []string{
			"web.svc.herd.\t5\tIN\tA\t10.77.0.11", "web.svc.herd.\t5\tIN\tA\t10.77.0.13"}}},
		{"names are case-insensitive", "WEB.Svc.HERD.", dns.TypeA, reply{Rcode: "NOERROR", AA: true, Answer: []string{
			"web.svc.herd.\t5\tIN\tA\t10.77.0.11", "web.svc.herd.\t5\tIN\tA\t10.77.0.13"}}},
		{"service SRV: one record per endpoint, boards as extra", "_http._tcp.web.svc.herd.", dns.TypeSRV, reply{Rcode: "NOERROR", AA: true,
			Answer: []string{
				"_http._tcp.web.svc.herd.\t5\tIN\tSRV\t0 1 27847 b1.node.herd.",
				"_http._tcp.web.svc.herd.\t5\tIN\tSRV\t0 1 23001 b3.node.herd.",
				"_http._tcp.web.svc.herd.\t5\tIN\tSRV\t0 1 23896 b3.node.herd.",
			},
			Extra: []string{"b1.node.herd.\t5\tIN\tA\t10.77.0.11", "b3.node.herd.\t5\tIN\tA\t10.77.0.13"}}},
		{"a service without ready endpoints exists, with no records", "idle.svc.herd.", dns.TypeA, reply{Rcode: "NOERROR", AA: true, NS: 1}},
		{"unnamed port is its target", "_metrics._tcp.idle.svc.herd.", dns.TypeSRV, reply{Rcode: "NOERROR", AA: true, NS: 1}},
		{"unknown port", "_ssh._tcp.web.svc.herd.", dns.TypeSRV, reply{Rcode: "NXDOMAIN", AA: true, NS: 1}},
		{"board", "b2.node.herd.", dns.TypeA, reply{Rcode: "NOERROR", AA: true, Answer: []string{"b2.node.herd.\t5\tIN\tA\t10.77.0.12"}}},
		{"board AAAA: no data", "b2.node.herd.", dns.TypeAAAA, reply{Rcode: "NOERROR", AA: true, NS: 1}},
		{"unknown service", "api.svc.herd.", dns.TypeA, reply{Rcode: "NXDOMAIN", AA: true, NS: 1}},
		{"unknown board", "b9.node.herd.", dns.TypeA, reply{Rcode: "NXDOMAIN", AA: true, NS: 1}},
		{"unknown shape", "a.b.c.herd.", dns.TypeA, reply{Rcode: "NXDOMAIN", AA: true, NS: 1}},
		{"apex SOA", "herd.", dns.TypeSOA, reply{Rcode: "NOERROR", AA: true, Answer: []string{
			"herd.\t5\tIN\tSOA\tns.herd. hostmaster.herd. 1 3600 600 86400 5"}}},
		{"outside the zone: no recursion", "example.com.", dns.TypeA, reply{Rcode: "REFUSED"}},
		{"a zone that only ends like herd.", "shepherd.", dns.TypeA, reply{Rcode: "REFUSED"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, ask(t, tt.qname, tt.qtype, st)); diff != "" {
				t.Errorf("%s %s (-want +got):\n%s", tt.qname, dns.TypeToString[tt.qtype], diff)
			}
		})
	}
}

// TestAnswerDeadBoardGone: once a board's endpoints leave the service
// (the service controller drops them when the board is NotReady), its
// address leaves the service's records.
func TestAnswerDeadBoardGone(t *testing.T) {
	st := testState()
	web := st.Services[0]
	web.Status.Endpoints = web.Status.Endpoints[1:] // b1 lost power
	got := ask(t, "web.svc.herd.", dns.TypeA, st)
	if diff := cmp.Diff([]string{"web.svc.herd.\t5\tIN\tA\t10.77.0.13"}, got.Answer); diff != "" {
		t.Errorf("after b1's endpoint left (-want +got):\n%s", diff)
	}
}

func TestAnswerMalformed(t *testing.T) {
	st := testState()
	none := new(dns.Msg)
	none.Id = 7
	if m := Answer(none, st); m.Rcode != dns.RcodeFormatError {
		t.Errorf("no question: %s, want FORMERR", dns.RcodeToString[m.Rcode])
	}
	two := new(dns.Msg)
	two.SetQuestion("web.svc.herd.", dns.TypeA)
	two.Question = append(two.Question, two.Question[0])
	if m := Answer(two, st); m.Rcode != dns.RcodeFormatError {
		t.Errorf("two questions: %s, want FORMERR", dns.RcodeToString[m.Rcode])
	}
	upd := new(dns.Msg)
	upd.SetUpdate("herd.")
	if m := Answer(upd, st); m.Rcode != dns.RcodeNotImplemented {
		t.Errorf("update: %s, want NOTIMP", dns.RcodeToString[m.Rcode])
	}
	chaos := new(dns.Msg)
	chaos.SetQuestion("web.svc.herd.", dns.TypeA)
	chaos.Question[0].Qclass = dns.ClassCHAOS
	if m := Answer(chaos, st); m.Rcode != dns.RcodeRefused {
		t.Errorf("class CHAOS: %s, want REFUSED", dns.RcodeToString[m.Rcode])
	}
}

// TestAnswerBounded: a service with many endpoints gets at most
// MaxRecords records in a reply.
func TestAnswerBounded(t *testing.T) {
	st := testState()
	web := st.Services[0]
	web.Status.Endpoints = nil
	for i := range 200 {
		web.Status.Endpoints = append(web.Status.Endpoints, api.Endpoint{Port: "http", Pod: "p", Node: "b" + string(rune('a'+i%26)),
			Address: "10.1." + itoa(i/250) + "." + itoa(i%250+1) + ":80"})
	}
	q := new(dns.Msg)
	for _, qt := range []uint16{dns.TypeA, dns.TypeSRV} {
		name := "web.svc.herd."
		if qt == dns.TypeSRV {
			name = "_http._tcp.web.svc.herd."
		}
		q.SetQuestion(name, qt)
		m := Answer(q, st)
		if n := len(m.Answer) + len(m.Extra); n == 0 || n > MaxRecords {
			t.Errorf("%s: %d records, want 1 to %d", name, n, MaxRecords)
		}
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// FuzzAnswer: whatever bytes arrive, a query that unpacks gets a reply
// that packs, and nothing panics.
func FuzzAnswer(f *testing.F) {
	for _, name := range []string{"web.svc.herd.", "_http._tcp.web.svc.herd.", "b1.node.herd.", "herd.", "example.com."} {
		q := new(dns.Msg)
		q.SetQuestion(name, dns.TypeA)
		b, err := q.Pack()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	st := testState()
	f.Fuzz(func(t *testing.T, b []byte) {
		q := new(dns.Msg)
		if err := q.Unpack(b); err != nil {
			return
		}
		if _, err := Answer(q, st).Pack(); err != nil {
			t.Fatalf("reply to %v does not pack: %v", q.Question, err)
		}
	})
}
