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

# The delayer: python3 "$NFQ_PY" DELAY_MS JITTER_MS QUEUE (see its file).
NFQ_PY=$here/lab.d/$NFQ_MARK.py # the delayer, a file of its own

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
      exec setsid ip netns exec "$ns" python3 "$NFQ_PY" "$delay" "$jitter" 0
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
