# scripts/lab.d/selftest.sh: `scripts/lab selftest [--down]`, the lab's own
# end-to-end check. Sourced by scripts/lab. Brings the lab up (3 boards, or
# keeps a bigger one), checks every promise of docs/lab.md on b1..b3, puts
# everything back as it was (unit removed, partitions healed, netem cleared)
# and, with --down, takes the lab down and checks that nothing is left.

ST_FAILS=0
ST_UNIT=lab-selftest-web.service
ST_PORT=8099

st_ok() { echo "ok    $*"; }
st_fail() { echo "FAIL  $*"; ST_FAILS=$((ST_FAILS + 1)); }
# st_check NAME CMD...: ok when CMD succeeds.
st_check() { local n=$1; shift; if "$@" >/dev/null 2>&1; then st_ok "$n"; else st_fail "$n"; fi; }
# st_eventually SECONDS NAME CMD...: ok when CMD succeeds within SECONDS.
st_eventually() {
  local s=$1 n=$2 deadline; shift 2
  deadline=$(($(date +%s) + s))
  until "$@" >/dev/null 2>&1; do
    (($(date +%s) < deadline)) || { st_fail "$n (not within ${s}s)"; return 0; }
    sleep 0.1
  done
  st_ok "$n"
}
st_not() { ! "$@"; }

# st_tcp FROM HOST PORT: FROM opens a TCP connection to HOST:PORT (1 s).
st_tcp() { ssh_board "$1" -o ConnectTimeout=2 "timeout 1 bash -c 'exec 3<>/dev/tcp/$2/$3'"; }
# st_fetch FROM URL: FROM gets URL with python3 (no curl on the boards).
st_fetch() {
  ssh_board "$1" -o ConnectTimeout=2 "python3 -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(\"$2\", timeout=2).read().decode())'"
}
# st_udp FROM TO: a UDP datagram from FROM reaches a listener on TO (gossip's transport).
st_udp() {
  local out
  ssh_board "$2" "timeout 3 python3 -c 'import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind((\"0.0.0.0\", 7999)); print(s.recvfrom(100)[0].decode())'" >"$ST_TMP/udp" 2>&1 &
  local pid=$!
  local i
  for ((i = 0; i < 20; i++)); do
    ssh_board "$1" "python3 -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b\"hello-from-$1\", (\"$(board_ip "$2")\", 7999))'" 2>/dev/null
    sleep 0.1
    [[ -s $ST_TMP/udp ]] && break
  done
  wait "$pid" || true
  out=$(cat "$ST_TMP/udp")
  [[ $out == "hello-from-$1" ]]
}
# st_ping_rtt FROM TO: average RTT in ms of 5 pings.
st_ping_rtt() { ssh_board "$1" "ping -c5 -i0.2 -q $2" | awk -F/ '/^rtt/ { print int($5) }'; }
# st_ping_loss FROM TO: loss in % of 300 fast pings.
st_ping_loss() { ssh_board "$1" "ping -c300 -i0.005 -W1 -q $2" | awk '/packet loss/ { for (i = 1; i <= NF; i++) if ($i ~ /%$/) { sub(/%/, "", $i); print int($i) } }'; }
st_between() { (($1 >= $2 && $1 <= $3)); }
st_pid1() { [[ $(ssh_board "$1" ps -p 1 -o comm=) == systemd ]]; }
st_running() { ssh_board "$1" systemctl is-system-running | grep -qxE 'running|degraded'; }
st_tools() { ssh_board "$1" 'command -v systemd-analyze && python3 -c "import http.server, urllib.request"'; }
st_addr() { ssh_board "$1" ip -4 -o addr show eth0 | grep -qF " $(board_ip "$1")/24 "; }
st_ids_differ() { [[ $(for b in "$@"; do ssh_board "$b" cat /etc/machine-id; done | sort -u | wc -l) == "$#" ]]; }
st_web() { st_fetch "$1" "http://$2:$ST_PORT/os-release" | grep -q bookworm; }
st_off() { [[ $(board_state "$1") == off ]]; }
st_gone() {
  [[ -z $(cg_pids "$1") ]] &&
    [[ -z $(ps -eo pid=,args= | awk -v d="--directory=$(board_root "$1")" '$2 ~ /systemd-nspawn$/ && index($0, d)') ]]
}
st_disk_kept() { ! mountpoint -q "$(board_root "$1")" && [[ -f $(board_dir "$1")/upper/etc/systemd/system/$ST_UNIT ]]; }
st_same_id() { [[ $(ssh_board "$1" cat /etc/machine-id) == "$2" ]]; }
st_prev_boot() { ssh_board "$1" journalctl --list-boots --no-pager | grep -q '^ *-1 '; }
st_nothing_left() {
  ! grep -qE " $LAB_DIR/| /run/netns/$NETNS_PREFIX" /proc/self/mountinfo &&
    ! ip netns list | grep -q "^$NETNS_PREFIX" &&
    ! ip -o link show | grep -qE ": ($BRIDGE|$VETH_PREFIX)" &&
    [[ -z $(stray_nspawns) && -z $(netem_stray_delayers) && -z $(stray_qemus) ]] &&
    [[ -z $(ls -d /sys/fs/cgroup/*/"$CG_NAME" /sys/fs/cgroup/"$CG_NAME" /sys/fs/cgroup/"$CG_NAME".slice 2>/dev/null) ]] &&
    [[ ! -e $BOARDS_DIR ]]
}

cmd_selftest() {
  local down=0
  case ${1:-} in --down) down=1 ;; "") ;; *) die "selftest: unknown option '$1' (only --down)" ;; esac
  lab_tmp ST_TMP -d
  local t0 t b
  t0=$(now)

  echo "== up"
  t=$(now)
  cmd_up 3 >>"$ST_TMP/log" 2>&1 || { cat "$ST_TMP/log"; die "selftest: up failed"; }
  echo "time  up 3: $(since "$t") s"
  for b in b1 b2; do
    board_is_vm "$b" && die "selftest: $b is a VM board; the selftest needs nspawn boards b1 and b2 (VM boards are checked after them: scripts/lab up 4 --vm 1)"
  done
  for b in b1 b2 b3; do
    st_check "$b: ssh as root, host key pinned (StrictHostKeyChecking yes)" ssh_board "$b" true
    st_check "$b: systemd is PID 1" st_pid1 "$b"
    st_check "$b: is-system-running = running|degraded" st_running "$b"
    st_check "$b: systemd-analyze, python3 http.server present" st_tools "$b"
    st_check "$b: address $(board_ip "$b") on eth0" st_addr "$b"
  done
  st_check "machine-ids differ" st_ids_differ b1 b2 b3

  echo "== board to board"
  st_check "b1 -> b2 ssh port (TCP)" st_tcp b1 b2 22
  st_check "b3 -> b1 ssh port (TCP)" st_tcp b3 b1 22
  st_check "b1 -> b2 UDP datagram" st_udp b1 b2
  st_check "b1 -> outside world unreachable (no route out of the lab)" st_not ssh_board b1 "ping -c1 -W1 192.0.2.1"

  echo "== a unit on b1"
  ssh_board_root b1 "cat >/etc/systemd/system/$ST_UNIT <<EOF
[Unit]
Description=scripts/lab selftest web server
[Service]
ExecStart=/usr/bin/python3 -m http.server $ST_PORT --directory /etc
Restart=always
[Install]
WantedBy=multi-user.target
EOF
systemctl daemon-reload && systemctl enable --now $ST_UNIT" >/dev/null 2>&1 || st_fail "install $ST_UNIT on b1"
  st_eventually 5 "b2 fetches http://b1:$ST_PORT/ from b1's unit" st_web b2 b1
  local mid; mid=$(ssh_board b1 cat /etc/machine-id)

  echo "== power pulled on b1"
  t=$(now)
  cmd_kill b1 >>"$ST_TMP/log" 2>&1
  echo "time  kill b1: $(since "$t") s"
  st_check "b1 is off" st_off b1
  st_check "no process of b1 left" st_gone b1
  st_check "b1's overlay unmounted, disk kept" st_disk_kept b1
  st_check "host cannot reach b1" st_not ssh_board b1 -o ConnectTimeout=1 true
  st_check "b2 cannot reach b1" st_not st_tcp b2 b1 22

  echo "== power back on b1"
  t=$(now)
  cmd_boot b1 >>"$ST_TMP/log" 2>&1 || st_fail "boot b1"
  echo "time  boot b1 (to ssh): $(since "$t") s"
  st_eventually 10 "$ST_UNIT active again by itself" ssh_board b1 systemctl is-active "$ST_UNIT"
  st_eventually 5 "b2 fetches from b1 again" st_web b2 b1
  st_check "b1 kept its machine-id" st_same_id b1 "$mid"
  st_check "b1's journal kept the previous boot" st_prev_boot b1

  echo "== partitions"
  net_partition b1 2>/dev/null
  st_check "partition b1: host cannot reach b1" st_not ssh_board b1 -o ConnectTimeout=1 true
  st_check "partition b1: b2 cannot reach b1" st_not st_tcp b2 b1 22
  st_check "partition b1: b2 still reaches b3" st_tcp b2 b3 22
  net_heal 2>/dev/null
  st_eventually 5 "heal: b2 reaches b1" st_tcp b2 b1 22
  net_partition b1,b2 2>/dev/null
  st_check "partition b1,b2: b1 reaches b2" st_tcp_ns b1 b2
  st_check "partition b1,b2: b1 cannot reach b3" st_not st_tcp_ns b1 b3
  st_check "partition b1,b2: host cannot reach b1" st_not ssh_board b1 -o ConnectTimeout=1 true
  net_heal 2>/dev/null
  st_eventually 5 "heal: host reaches b1 again" ssh_board b1 -o ConnectTimeout=1 true

  echo "== netem"
  local rtt loss
  net_netem b2 delay 100ms 2>/dev/null
  rtt=$(st_ping_rtt b1 b2)
  st_check "netem b2 delay 100ms: b1 -> b2 RTT ${rtt:-?} ms in [195, 400]" st_between "${rtt:-0}" 195 400
  net_netem b2 --out delay 50ms 2>/dev/null
  rtt=$(st_ping_rtt b1 b2)
  st_check "netem b2 --out delay 50ms: RTT ${rtt:-?} ms in [48, 150]" st_between "${rtt:-0}" 48 150
  net_netem b2 loss 30% 2>/dev/null
  loss=$(st_ping_loss b1 b2)
  st_check "netem b2 loss 30% (both ways): ping loss ${loss:-?}% in [35, 65]" st_between "${loss:--1}" 35 65
  net_netem b2 clear 2>/dev/null
  loss=$(st_ping_loss b1 b2)
  st_check "netem b2 clear: ping loss ${loss:-?}% = 0" st_between "${loss:--1}" 0 0
  net_netem b1 --out delay 50ms 2>/dev/null
  { cmd_kill b1 && cmd_boot b1; } >>"$ST_TMP/log" 2>&1 || st_fail "kill + boot b1"
  rtt=$(st_ping_rtt b2 b1)
  st_check "netem b1 survives kill + boot: RTT ${rtt:-?} ms in [48, 150]" st_between "${rtt:-0}" 48 150
  net_netem b1 clear 2>/dev/null

  for b in $(boards); do board_is_vm "$b" && st_vm "$b"; done

  echo "== clean up"
  ssh_board_root b1 "systemctl disable --now $ST_UNIT; rm -f /etc/systemd/system/$ST_UNIT; systemctl daemon-reload" >/dev/null 2>&1 ||
    st_fail "remove $ST_UNIT from b1"

  if ((down)); then
    echo "== down"
    t=$(now)
    cmd_down >>"$ST_TMP/log" 2>&1
    echo "time  down: $(since "$t") s"
    st_check "nothing left: mounts, netns, links, processes, cgroups, disks" st_nothing_left
  fi

  ((ST_FAILS == 0)) || { echo "--- lab output:"; cat "$ST_TMP/log"; }
  rm -rf "$ST_TMP"
  echo "time  selftest: $(since "$t0") s"
  if ((ST_FAILS)); then echo "selftest: $ST_FAILS FAILED"; return 1; fi
  echo "selftest: all ok"
}

# st_tcp_ns FROM TO: like st_tcp but run from the host inside FROM's netns
# (the host cannot ssh into a board cut off with others).
st_tcp_ns() { ip netns exec "$(board_netns "$1")" timeout 1 bash -c "exec 3<>/dev/tcp/$(board_ip "$2")/22" 2>/dev/null; }

# st_vm bN: the promises of a VM board (docs/lab.md, "VM boards"), its
# power pulled and back.
st_vm() {
  local b=$1 t mid ver
  echo "== VM board $b"
  st_check "$b: ssh as pi, host key pinned" ssh_board "$b" true
  st_check "$b: root login refused" st_not ssh_board "$b" -o User=root -o ConnectTimeout=5 true
  st_check "$b: sudo -n without a password" ssh_board "$b" sudo -n true
  st_check "$b: sshd says permitrootlogin no" ssh_board_root "$b" "sshd -T | grep -qix 'permitrootlogin no'"
  st_check "$b: systemd-detect-virt = qemu" st_out qemu ssh_board "$b" systemd-detect-virt
  st_check "$b: uname -m = aarch64" st_out aarch64 ssh_board "$b" uname -m
  ver=$(sed -n 's/^kernel //p' "$VM_CACHE/stamp")
  st_check "$b: its own kernel, uname -r = $ver" st_out "$ver" ssh_board "$b" uname -r
  st_check "$b: systemd is PID 1" st_pid1 "$b"
  st_check "$b: is-system-running = running|degraded" st_running "$b"
  st_check "$b: cgroup_disable=memory, no memory controller" ssh_board "$b" "grep -qw cgroup_disable=memory /proc/cmdline && ! grep -qw memory /sys/fs/cgroup/cgroup.controllers"
  st_check "$b: address $(board_ip "$b") on eth0" st_addr "$b"
  st_check "b1 -> $b ssh port (TCP)" st_tcp b1 "$b" 22
  st_check "$b -> b1 ssh port (TCP)" st_tcp "$b" b1 22
  mid=$(ssh_board "$b" cat /etc/machine-id)
  ssh_board_root "$b" "echo lab-selftest >/var/lib/lab-selftest && sync" >/dev/null 2>&1 || st_fail "$b: write a file"
  t=$(now)
  cmd_kill "$b" >>"$ST_TMP/log" 2>&1
  echo "time  kill $b: $(since "$t") s"
  st_check "$b is off, no qemu left" st_vm_gone "$b"
  st_check "$b: its tap is down" st_out down net_link_state "$b"
  st_check "b1 cannot reach $b" st_not st_tcp b1 "$b" 22
  t=$(now)
  cmd_boot "$b" >>"$ST_TMP/log" 2>&1 || st_fail "boot $b"
  echo "time  boot $b (to ssh): $(since "$t") s"
  st_check "$b kept its machine-id" st_same_id "$b" "$mid"
  st_check "$b kept a file synced before the power pull" st_out lab-selftest ssh_board "$b" cat /var/lib/lab-selftest
  st_check "$b's journal kept the previous boot" st_prev_boot "$b"
  ssh_board_root "$b" "rm -f /var/lib/lab-selftest" >/dev/null 2>&1 || true
}

# st_out WANT CMD...: CMD prints WANT (one line).
st_out() { local w=$1; shift; [[ $("$@" 2>/dev/null) == "$w" ]]; }
st_vm_gone() { st_off "$1" && [[ -z $(cg_pids "$1") && -z $(stray_qemus "$1") ]]; }
