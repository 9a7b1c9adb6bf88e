# scripts/lab.d/net.sh: the lab's network. Sourced by scripts/lab.
#
#   host namespace:  bridge herdlab0 ($HOST_IP/24), one veth end herdlab-bN per board
#   netns herd-bN:   lo, eth0 = $NET.(10+N)/24, default route "dev eth0" (on-link,
#                    no gateway: the host does not route, nothing leaves the bridge)
#   VM board bN:     no netns; a tap device herdlab-bN on the bridge, the guest's
#                    eth0 configured the same way by its initramfs (vm.sh)
#
# Faults: a pulled plug or a cut cable is the host end going down (the board's
# eth0 loses carrier, packets vanish silently); a partition group is a set of
# host ends moved onto a bridge of their own (herdlab-pK, no address). Loss and
# delay: see netem.sh.

# Fixed MAC addresses (locally administered 02:77:…): a board that reboots
# keeps its MAC like a real one, so nobody's ARP cache goes stale.
board_mac() { local i; i=$(board_index "$1"); printf '02:77:00:00:%02x:%02x' $((i >> 8)) $((i & 255)); }
host_mac() { local i; i=$(board_index "$1"); printf '02:77:01:00:%02x:%02x' $((i >> 8)) $((i & 255)); }
BRIDGE_MAC=02:77:ff:00:00:01

net_bridge_up() {
  ip link show "$BRIDGE" &>/dev/null || ip link add name "$BRIDGE" address "$BRIDGE_MAC" type bridge forward_delay 0
  ip addr replace "$HOST_IP/24" dev "$BRIDGE"
  ip link set "$BRIDGE" up
}

# netns_ok NS: the namespace exists and can be entered (not a stale file).
netns_ok() { [[ -e /run/netns/$1 ]] && ip netns exec "$1" true 2>/dev/null; }

# net_board_up bN [down]: namespace, veth, address, route; the host end is
# attached to the lab bridge (unless the board sits in a partition group) and
# set up unless the board is partitioned alone (or "down" is asked for).
net_board_up() {
  local b=$1 want=${2:-up} ns veth ip
  ns=$(board_netns "$b") veth=$(board_veth "$b") ip=$(board_ip "$b")
  if ! netns_ok "$ns"; then
    [[ -e /run/netns/$ns ]] && { ip netns del "$ns" 2>/dev/null || rm -f "/run/netns/$ns"; }
    ip netns add "$ns"
  fi
  ip -n "$ns" link set lo up
  if ! ip link show "$veth" &>/dev/null; then
    ip -n "$ns" link del eth0 2>/dev/null || true
    ip link add "$veth" address "$(host_mac "$b")" type veth peer name eth0 address "$(board_mac "$b")" netns "$ns"
  fi
  local group; group=$(cat "$(board_dir "$b")/partition" 2>/dev/null || true)
  if [[ $group == "$PART_PREFIX"* ]] && ip link show "$group" &>/dev/null; then
    ip link set "$veth" master "$group"
  else
    ip link set "$veth" master "$BRIDGE"
  fi
  ip -n "$ns" addr replace "$ip/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" route replace default dev eth0
  if [[ $group == alone || $want == down ]]; then ip link set "$veth" down; else ip link set "$veth" up; fi
}

# net_board_reset bN: after a power pull, a fresh namespace and veth (host
# end down), as after a real reboot: the dead board's orphaned sockets must
# not wake up with the link (a FIN-WAIT socket would send its FIN to the
# peers on the next boot). Netem settings are the link's: put back.
net_board_reset() {
  if board_is_vm "$1"; then vm_net_reset "$1"; return; fi
  nfq_stop_delayer "$1"
  net_board_del "$1"
  net_board_up "$1" down
  netem_restore "$1"
}

net_link_down() { ip link set "$(board_veth "$1")" down 2>/dev/null || true; }

# net_link_state bN: up, down, or absent (of the host end).
net_link_state() {
  local v; v=$(board_veth "$1")
  if ! ip link show "$v" &>/dev/null; then echo absent
  elif ip -o link show "$v" | grep -q '<[^>]*\bUP\b'; then echo up
  else echo down
  fi
}

# net_board_del bN: veth pair and namespace of one board.
net_board_del() {
  ip link del "$(board_veth "$1")" 2>/dev/null || true
  ip netns del "$(board_netns "$1")" 2>/dev/null || true
}

# net_all_del: every namespace, veth and bridge of the lab, found by name.
net_all_del() {
  local ns l
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}'); do
    # herd-stranger: the keyless LAN host of the e2e hostile scenarios
    [[ $ns =~ ^${NETNS_PREFIX}(b[1-9][0-9]*|stranger)$ ]] && { ip netns del "$ns" 2>/dev/null || true; }
  done
  for l in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1); do
    # a veth may already be gone with its namespace
    [[ $l =~ ^${VETH_PREFIX}(b[1-9][0-9]*|p[0-9]+|x0)$ || $l == "$BRIDGE" ]] && { ip link del "$l" 2>/dev/null || true; }
  done
  return 0
}

# net_partition GROUP...: each GROUP is one board (cut off alone: its link
# goes down, like a pulled cable) or boards joined by commas (they keep
# reaching each other, on a bridge of their own, and nobody else: not the
# other boards, not the host).
net_partition() {
  local g b k
  for g in "$@"; do
    IFS=, read -ra members <<<"$g"
    for b in "${members[@]}"; do known_board "$b"; done
    if ((${#members[@]} == 1)); then
      echo alone >"$(board_dir "${members[0]}")/partition"
      net_link_down "${members[0]}"
      echo "lab: ${members[0]}: link down at $(now)"
      log "partition: ${members[0]} cut off"
      continue
    fi
    k=1
    while ip link show "$PART_PREFIX$k" &>/dev/null; do k=$((k + 1)); done
    ip link add name "$PART_PREFIX$k" type bridge forward_delay 0
    ip link set "$PART_PREFIX$k" up
    for b in "${members[@]}"; do
      echo "$PART_PREFIX$k" >"$(board_dir "$b")/partition"
      ip link show "$(board_veth "$b")" &>/dev/null || continue
      ip link set "$(board_veth "$b")" master "$PART_PREFIX$k"
      if [[ $(board_state "$b") == running ]]; then ip link set "$(board_veth "$b")" up; fi
    done
    log "partition: ${members[*]} together on $PART_PREFIX$k, cut off from the rest and from the host"
  done
}

# net_heal: every board back on the lab bridge; links of running boards up.
net_heal() {
  local b l
  for b in $(boards); do
    rm -f "$(board_dir "$b")/partition"
    ip link show "$(board_veth "$b")" &>/dev/null || continue
    ip link set "$(board_veth "$b")" master "$BRIDGE"
    if [[ $(board_state "$b") == running ]]; then ip link set "$(board_veth "$b")" up; fi
  done
  for l in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1); do
    [[ $l =~ ^${PART_PREFIX}[0-9]+$ ]] && { ip link del "$l" || true; }
  done
  log "healed: every board back on $BRIDGE"
}
