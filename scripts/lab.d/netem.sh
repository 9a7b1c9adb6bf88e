# scripts/lab.d/netem.sh: packet loss and delay on a board's link. Sourced
# by scripts/lab.
#
# Directions: "in" = packets the board receives, "out" = packets it sends,
# default both (so "delay 100ms" adds 200 ms to a round trip through that
# board, and 10 % loss on two boards loses ≈19 % of packets between them).
#
# Two mechanisms:
#   tc      a netem qdisc on the host end of the veth (in) and on eth0 inside
#           the board's netns (out). Any netem argument works. Needs the
#           kernel's sch_netem.
#   nfq     when the kernel has no sch_netem (like this project's CI VM):
#           iptables rules inside the board's netns (never the host's):
#           loss = `-m statistic --mode random -j DROP`, delay = NFQUEUE to a
#           small userspace delayer (python3 on the host, run inside the netns)
#           that holds each packet for the delay and then accepts it
#           (`--queue-bypass`: if the delayer dies, packets pass undelayed).
#           Only "loss P%" and "delay T [JITTER]" are emulated. IPv4 only; ARP
#           is never touched.
# State: $BOARDS_DIR/bN/netem = "DIRECTION MECHANISM ARGS..."; the delayer's
# PID in bN/netem-delay.pid, its output in bN/netem.log.

NFQ_MARK=herd-lab-nfq # in the delayer's command line, to find it again

# The delayer: python3 -c "$NFQ_PY" DELAY_MS JITTER_MS QUEUE. Speaks
# nfnetlink_queue directly (no library): bind the queue in copy-meta mode,
# read packet ids, give each an NF_ACCEPT verdict when its time has come.
NFQ_PY='# herd-lab-nfq: delay queued packets, then accept them
import heapq, os, random, select, signal, socket, struct, sys, time
delay = float(sys.argv[1]) / 1000.0
jitter = float(sys.argv[2]) / 1000.0
qnum = int(sys.argv[3])
SUBSYS = 3  # NFNL_SUBSYS_QUEUE
PACKET, VERDICT, CONFIG = 0, 1, 2
s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 12)  # NETLINK_NETFILTER
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
s.bind((0, 0))
seq = 0
def attr(t, payload):
    n = 4 + len(payload)
    return struct.pack("=HH", n, t) + payload + b"\0" * ((4 - n % 4) % 4)
def send(msg, attrs, flags=1):
    global seq
    seq += 1
    body = struct.pack("=BBH", socket.AF_UNSPEC, 0, socket.htons(qnum)) + b"".join(attrs)
    s.send(struct.pack("=IHHII", 16 + len(body), (SUBSYS << 8) | msg, flags, seq, 0) + body)
def config(attrs):
    send(CONFIG, attrs, 1 | 4)  # NLM_F_REQUEST | NLM_F_ACK
    data = s.recv(65536)
    if struct.unpack_from("=H", data, 4)[0] == 2:  # NLMSG_ERROR
        err = struct.unpack_from("=i", data, 16)[0]
        if err:
            sys.exit("nfqueue config: " + os.strerror(-err))
config([attr(1, struct.pack("=BxH", 1, socket.htons(socket.AF_INET)))])  # NFQA_CFG_CMD: BIND
config([attr(2, struct.pack("!IB", 0, 1)), attr(3, struct.pack("!I", 8192))])  # COPY_META, QUEUE_MAXLEN
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
print("ready", flush=True)
pending = []
while True:
    timeout = max(0.0, pending[0][0] - time.monotonic()) if pending else None
    if select.select([s], [], [], timeout)[0]:
        try:
            data = s.recv(1 << 16)
        except OSError:  # ENOBUFS: the kernel dropped some (lost packets)
            data = b""
        off = 0
        while off + 16 <= len(data):
            n, t = struct.unpack_from("=IH", data, off)
            if n < 16:
                break
            if t == (SUBSYS << 8) | PACKET:
                a = off + 20
                while a + 4 <= off + n:
                    an, at = struct.unpack_from("=HH", data, a)
                    if an < 4:
                        break
                    if at & 0x7FFF == 1:  # NFQA_PACKET_HDR: packet id first
                        pid = struct.unpack_from("!I", data, a + 4)[0]
                        d = delay + (random.uniform(-jitter, jitter) if jitter else 0.0)
                        heapq.heappush(pending, (time.monotonic() + max(0.0, d), pid))
                        break
                    a += (an + 3) & ~3
            off += (n + 3) & ~3
    now = time.monotonic()
    while pending and pending[0][0] <= now:
        pid = heapq.heappop(pending)[1]
        send(VERDICT, [attr(2, struct.pack("!II", 1, pid))])  # NFQA_VERDICT_HDR: NF_ACCEPT
'

# to_ms T: "100ms", "0.1s", "500us" -> milliseconds; dies on anything else.
to_ms() {
  local t=$1
  [[ $t =~ ^([0-9]+(\.[0-9]+)?)(ms|s|us)$ ]] || die "netem: bad time '$t' (want e.g. 100ms, 0.5s, 500us)"
  awk -v v="${BASH_REMATCH[1]}" -v u="${BASH_REMATCH[3]}" 'BEGIN { m = (u == "s") ? 1000 : (u == "us") ? 0.001 : 1; printf "%g", v * m }'
}

# nfq_ipt NS ARGS...: iptables inside the board's netns.
nfq_ipt() { local ns=$1; shift; ip netns exec "$ns" iptables -w "$@"; }

# nfq_stop_delayer bN: the board's delayer, by its PID, if it is ours.
nfq_stop_delayer() {
  local f pid; f=$(board_dir "$1")/netem-delay.pid
  pid=$(cat "$f" 2>/dev/null || true)
  if [[ -n $pid ]] && grep -qaF "$NFQ_MARK" "/proc/$pid/cmdline" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    local i
    for ((i = 0; i < 50; i++)); do [[ -d /proc/$pid ]] || break; sleep 0.02; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}

# nfq_clear bN: rules and delayer gone.
nfq_clear() {
  local ns c; ns=$(board_netns "$1")
  nfq_stop_delayer "$1"
  netns_ok "$ns" || return 0
  command -v iptables >/dev/null || return 0
  nfq_ipt "$ns" -D OUTPUT -o eth0 -j HERDLAB-OUT 2>/dev/null || true
  nfq_ipt "$ns" -D INPUT -i eth0 -j HERDLAB-IN 2>/dev/null || true
  for c in HERDLAB-OUT HERDLAB-IN; do
    nfq_ipt "$ns" -F "$c" 2>/dev/null || true
    nfq_ipt "$ns" -X "$c" 2>/dev/null || true
  done
}

# nfq_apply bN DIR ARGS...: loss/delay by iptables + the delayer.
nfq_apply() {
  local b=$1 dir=$2; shift 2
  need_cmds iptables python3
  local loss="" delay="" jitter=0
  while (($#)); do
    case $1 in
      loss)
        shift; [[ ${1:-} == random ]] && shift
        [[ ${1:-} =~ ^([0-9]+(\.[0-9]+)?)%?$ ]] || die "netem: bad loss '${1:-}' (want e.g. 10%)"
        loss=$(awk -v p="${BASH_REMATCH[1]}" 'BEGIN { printf "%g", p / 100 }'); shift ;;
      delay)
        shift; delay=$(to_ms "${1:-}"); shift
        if [[ ${1:-} =~ ^[0-9.]+(ms|s|us)$ ]]; then jitter=$(to_ms "$1"); shift; fi ;;
      *) die "netem: this kernel has no sch_netem; the lab emulates only 'loss P%' and 'delay T [JITTER]' (got '$1')" ;;
    esac
  done
  local ns d c; ns=$(board_netns "$b") d=$(board_dir "$b")
  nfq_clear "$b"
  if [[ -n $delay ]]; then
    : >"$d/netem.log"
    (
      exec 9>&-
      exec setsid ip netns exec "$ns" python3 -c "$NFQ_PY" "$delay" "$jitter" 0
    ) </dev/null >>"$d/netem.log" 2>&1 &
    echo $! >"$d/netem-delay.pid"
    local i
    for ((i = 0; i < 100; i++)); do
      grep -q '^ready' "$d/netem.log" && break
      [[ -d /proc/$(cat "$d/netem-delay.pid") ]] || die "netem: the delayer of $b failed: $(cat "$d/netem.log")"
      sleep 0.02
    done
    grep -q '^ready' "$d/netem.log" || die "netem: the delayer of $b did not start: $(cat "$d/netem.log")"
  fi
  nfq_ipt "$ns" -N HERDLAB-OUT
  nfq_ipt "$ns" -N HERDLAB-IN
  nfq_ipt "$ns" -I OUTPUT -o eth0 -j HERDLAB-OUT
  nfq_ipt "$ns" -I INPUT -i eth0 -j HERDLAB-IN
  for c in HERDLAB-OUT HERDLAB-IN; do
    [[ $c == HERDLAB-OUT && $dir == in ]] && continue
    [[ $c == HERDLAB-IN && $dir == out ]] && continue
    [[ -n $loss ]] && nfq_ipt "$ns" -A "$c" -m statistic --mode random --probability "$loss" -j DROP
    [[ -n $delay ]] && nfq_ipt "$ns" -A "$c" -j NFQUEUE --queue-num 0 --queue-bypass
  done
  return 0
}

# tc_clear bN: netem qdiscs gone from both ends.
tc_clear() {
  tc qdisc del dev "$(board_veth "$1")" root 2>/dev/null || true
  ip netns exec "$(board_netns "$1")" tc qdisc del dev eth0 root 2>/dev/null || true
}

# tc_apply bN DIR ARGS...: returns 3 when the kernel has no netem.
tc_apply() {
  local b=$1 dir=$2 err; shift 2
  tc_clear "$b"
  if [[ $dir == in || $dir == both ]]; then
    if ! err=$(tc qdisc replace dev "$(board_veth "$b")" root netem "$@" 2>&1); then
      [[ $err == *"qdisc kind is unknown"* ]] && return 3
      die "netem: tc: $err"
    fi
  fi
  if [[ $dir == out || $dir == both ]]; then
    if ! err=$(ip netns exec "$(board_netns "$b")" tc qdisc replace dev eth0 root netem "$@" 2>&1); then
      tc_clear "$b"
      [[ $err == *"qdisc kind is unknown"* ]] && return 3
      die "netem: tc: $err"
    fi
  fi
}

# net_netem bN [--in|--out|--both] clear|ARGS...
net_netem() {
  local b=$1; shift
  local dir=both
  case ${1:-} in --in) dir=in; shift ;; --out) dir=out; shift ;; --both) shift ;; esac
  (($#)) || die "netem: say what: scripts/lab netem $b loss 10% | delay 100ms | clear"
  ip link show "$(board_veth "$b")" &>/dev/null || die "netem: $b has no link (is the lab up?)"
  local d; d=$(board_dir "$b")
  if [[ $1 == clear ]]; then
    tc_clear "$b"
    nfq_clear "$b"
    rm -f "$d/netem"
    log "netem: $b cleared"
    return
  fi
  nfq_clear "$b"
  local mech=tc rc=0
  tc_apply "$b" "$dir" "$@" || rc=$?
  if ((rc == 3)); then
    mech=nfq
    nfq_apply "$b" "$dir" "$@"
  fi
  echo "$dir $mech $*" >"$d/netem"
  local what; case $dir in both) what="into and out of" ;; in) what=into ;; out) what="out of" ;; esac
  log "netem: $b $* on packets $what the board (by $mech)"
}

# netem_restore bN: apply the board's saved netem settings again (after its
# link was made afresh).
netem_restore() {
  local st w; st=$(cat "$(board_dir "$1")/netem" 2>/dev/null || true)
  [[ -n $st ]] || return 0
  read -ra w <<<"$st"
  if [[ ${w[1]} == tc ]]; then tc_apply "$1" "${w[0]}" "${w[@]:2}" || true
  else nfq_apply "$1" "${w[0]}" "${w[@]:2}"; fi
}

# net_netem_show bN: "-" or "DIRECTION:ARGS".
net_netem_show() {
  local s; s=$(cat "$(board_dir "$1")/netem" 2>/dev/null || true)
  [[ -n $s ]] || { echo -; return; }
  local w; read -ra w <<<"$s"
  echo "${w[0]}: ${w[*]:2}"
}

# netem_stray_delayers: PIDs of delayers left by a crashed lab.
netem_stray_delayers() {
  ps -eo pid=,args= | awk -v m="$NFQ_MARK" '$2 ~ /python3/ && index($0, m) { print $1 }'
}
