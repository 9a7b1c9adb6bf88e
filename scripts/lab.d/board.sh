# scripts/lab.d/board.sh: one board = a netns + an overlay disk + a
# systemd-nspawn booting systemd in its own cgroup. Sourced by scripts/lab.
#
# $BOARDS_DIR/bN/upper, work   the board's disk (overlay upper/work dirs)
# $BOARDS_DIR/bN/root          the overlay, mounted while the board runs
# $BOARDS_DIR/bN/console.log   nspawn's output (the board's console), appended
# $BOARDS_DIR/bN/pid           nspawn's PID (informational; the cgroup is the truth)
# $BOARDS_DIR/bN/partition     "alone" or herdlab-pK while partitioned

# board_state bN: running (a process of it is alive) or off.
board_state() { if cg_populated "$1"; then echo running; else echo off; fi; }

ensure_key() {
  [[ -f $KEY && -f $KEY.pub ]] && return 0
  install -d -m 700 "$(dirname "$KEY")"
  rm -f "$KEY" "$KEY.pub"
  ssh-keygen -q -t ed25519 -N '' -C "herd-lab@$(hostname)" -f "$KEY"
  log "lab SSH key: $KEY"
}

# disk_mount bN: the overlay at bN/root (lower: the shared root).
disk_mount() {
  local d; d=$(board_dir "$1")
  mkdir -p "$d/upper" "$d/work" "$d/root"
  mountpoint -q "$d/root" && return 0
  mount -t overlay "herdlab-$1" -o "lowerdir=$(rootfs_dir "$(board_arch "$1")"),upperdir=$d/upper,workdir=$d/work" "$d/root" ||
    die "could not mount the overlay of $1 at $d/root"
}

# mounts_under DIR: mount points at or below DIR, deepest first.
mounts_under() {
  awk -v p="$1" '$5 == p || index($5, p "/") == 1 { print $5 }' /proc/self/mountinfo | sort -r
}

disk_umount() {
  local d m; d=$(board_dir "$1")
  for m in $(mounts_under "$d"); do
    umount "$m" 2>/dev/null || umount -l "$m" || log "warning: could not unmount $m"
  done
}

# provision bN: what makes the board itself on its own disk (written through
# the mounted overlay into bN/upper): its SSH host key (first boot only),
# the lab's key among root's authorized keys, the lab's names in /etc/hosts.
provision() {
  local b=$1 r p; r=$(board_root "$1")
  # the host writes into the board's disk as root: never through a symlink
  # the board made (it would resolve on the host)
  for p in etc etc/ssh root root/.ssh; do
    [[ -L $r/$p ]] && die "$b: /$p on its disk is a symlink; refusing to provision (remove $(board_dir "$b") to start afresh)"
  done
  for p in etc/hosts root/.ssh/authorized_keys etc/ssh/ssh_host_ed25519_key etc/ssh/ssh_host_ed25519_key.pub; do
    [[ -L $r/$p ]] && rm -f "$r/$p"
  done
  if [[ ! -f $r/etc/ssh/ssh_host_ed25519_key ]]; then
    rm -f "$r/etc/ssh/ssh_host_ed25519_key.pub"
    ssh-keygen -q -t ed25519 -N '' -C "root@$b" -f "$r/etc/ssh/ssh_host_ed25519_key"
  fi
  install -d -m 700 "$r/root/.ssh"
  touch "$r/root/.ssh/authorized_keys"
  chmod 600 "$r/root/.ssh/authorized_keys"
  grep -qxF "$(cat "$KEY.pub")" "$r/root/.ssh/authorized_keys" || cat "$KEY.pub" >>"$r/root/.ssh/authorized_keys"
  # and for pi, the sudo user (roots of prep 5 and later have one)
  local pi_ids; pi_ids=$(awk -F: '$1 == "pi" { print $3 ":" $4 }' "$r/etc/passwd" 2>/dev/null)
  if [[ -n $pi_ids ]]; then
    for p in home home/pi home/pi/.ssh; do
      [[ -L $r/$p ]] && die "$b: /$p on its disk is a symlink; refusing to provision (remove $(board_dir "$b") to start afresh)"
    done
    [[ -L $r/home/pi/.ssh/authorized_keys ]] && rm -f "$r/home/pi/.ssh/authorized_keys"
    install -d -m 700 -o "${pi_ids%:*}" -g "${pi_ids#*:}" "$r/home/pi/.ssh"
    install -m 600 -o "${pi_ids%:*}" -g "${pi_ids#*:}" "$KEY.pub" "$r/home/pi/.ssh/authorized_keys"
  fi
  # /etc/hosts: keep what the board wrote itself, replace the lab's block
  local hosts=$r/etc/hosts tmp x
  lab_tmp tmp
  if [[ -f $hosts ]]; then sed '/^# herd-lab begin/,/^# herd-lab end/d' "$hosts" >"$tmp"; else printf '127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' >"$tmp"; fi
  {
    echo "# herd-lab begin (rewritten by scripts/lab at each boot)"
    printf '%s\t%s\n' "$HOST_IP" herdlab-host
    for x in $(boards); do printf '%s\t%s\n' "$(board_ip "$x")" "$x"; done
    echo "# herd-lab end"
  } >>"$tmp"
  cat "$tmp" >"$hosts"
  rm -f "$tmp"
}

# write_ssh_files: known_hosts from each board's own disk (the trusted path:
# never trust-on-first-use over the network) and the ssh config snippet.
write_ssh_files() {
  local b pub kh=$KNOWN_HOSTS.tmp cfg=$SSH_CONFIG.tmp
  : >"$kh"
  {
    echo "# written by scripts/lab: ssh -F $SSH_CONFIG b1"
    echo
  } >"$cfg"
  for b in $(boards); do
    pub=$(board_dir "$b")/upper/etc/ssh/ssh_host_ed25519_key.pub
    # a VM board: the key the lab made and lab-init writes onto its disk at
    # every boot (the host cannot read the qcow2 disk without a mount)
    board_is_vm "$b" && pub=$(board_dir "$b")/ssh/ssh_host_ed25519_key.pub
    [[ -f $pub ]] && echo "$b,$(board_ip "$b") $(cut -d' ' -f1,2 "$pub")" >>"$kh"
    cat >>"$cfg" <<EOF
Host $b
  HostName $(board_ip "$b")
  User $(board_user "$b")
  IdentityFile $KEY
  IdentitiesOnly yes
  UserKnownHostsFile $KNOWN_HOSTS
  GlobalKnownHostsFile /dev/null
  StrictHostKeyChecking yes
  HostKeyAlgorithms ssh-ed25519
  ConnectTimeout 5
  LogLevel ERROR

EOF
  done
  mv "$kh" "$KNOWN_HOSTS"
  mv "$cfg" "$SSH_CONFIG"
}

# board_cgroup2 bN: true when the board boots on the unified cgroup
# hierarchy with bpf() allowed (the marker `boot --cgroup2` leaves).
board_cgroup2() { [[ -e $(board_dir "$1")/cgroup2 ]]; }

# board_start bN: power on (no wait). The caller holds the lock and has
# ensured the root, the key and the bridge.
board_start() {
  local b=$1 d; d=$(board_dir "$1")
  [[ $(board_state "$b") == running ]] && return 0
  if board_is_vm "$b"; then vm_start "$b"; return; fi
  board_cleanup "$b" # leftovers of a crash: cgroup folders, propagate dir
  mkdir -p "$d"
  net_board_up "$b"
  disk_mount "$b"
  provision "$b"
  echo "--- $(date -Is) power on" >>"$d/console.log"
  # A cgroup2 board (boot --cgroup2): its systemd runs on the unified
  # hierarchy (the host's cgroup2 one, also on a hybrid host) and may call
  # bpf(), so DevicePolicy=/DeviceAllow= are enforced (BPF device
  # programs); nspawn's seccomp filter otherwise refuses bpf() and systemd
  # goes on without them. No resource controllers there on a hybrid host.
  local env=() extra=()
  if board_cgroup2 "$b"; then
    [[ -n $CG_V2 ]] || die "$b: --cgroup2 needs a cgroup2 hierarchy on the host"
    env=(env SYSTEMD_NSPAWN_UNIFIED_HIERARCHY=1)
    extra=(--system-call-filter=bpf)
  fi
  local pid
  pid=$(cg_launch "$b" "$d/console.log" "${env[@]}" \
    systemd-nspawn --boot --directory="$d/root" --machine="$b" \
    --register=no --keep-unit --settings=no --link-journal=no \
    --resolv-conf=off --timezone=off --console=read-only \
    --network-namespace-path="/run/netns/$(board_netns "$b")" "${extra[@]}") ||
    die "could not start $b: see $d/console.log"
  echo "$pid" >"$d/pid"
}

# board_wait bN DEADLINE(epoch s) [TIMEOUT s, for the message]: until root
# logs in over ssh; prints the seconds it took after T0 (env), or fails with
# the console's tail.
board_wait() {
  local b=$1 deadline=$2 timeout=${3:-$BOOT_TIMEOUT} ct=1 pause=0.1
  # under qemu-user sshd's fork + re-exec alone can take a second
  board_is_foreign "$b" && ct=3
  # a VM board: tens of seconds of kernel and systemd under TCG first
  board_is_vm "$b" && pause=0.5
  until ssh_board "$b" -o ConnectTimeout=$ct true 2>/dev/null; do
    if (($(date +%s) >= deadline)); then
      log "$b: ssh does not answer at $(board_ip "$b") after ${timeout}s; console ($(board_dir "$b")/console.log):"
      tail -n 15 "$(board_dir "$b")/console.log" >&2
      return 1
    fi
    if [[ $(board_state "$b") != running ]]; then
      log "$b: stopped while booting; console ($(board_dir "$b")/console.log):"
      tail -n 15 "$(board_dir "$b")/console.log" >&2
      return 1
    fi
    sleep "$pause"
  done
}

# boards_boot bN...: power on those of the boards that are off, in
# parallel, and wait until each of them answers ssh.
boards_boot() {
  local b t0 pids=() failed=0 deadline
  t0=$(now)
  for b in "$@"; do
    if [[ $(board_state "$b") == running ]]; then
      log "$b is already running"
    else
      board_start "$b"
    fi
  done
  write_ssh_files
  deadline=$(($(date +%s) + BOOT_TIMEOUT))
  local emu_deadline=$(($(date +%s) + EMU_BOOT_TIMEOUT)) vm_deadline=$(($(date +%s) + VM_BOOT_TIMEOUT))
  for b in "$@"; do
    if [[ -f $(board_dir "$b")/partition ]]; then
      log "$b is partitioned ($(cat "$(board_dir "$b")/partition")): not waiting for ssh (scripts/lab heal)"
      continue
    fi
    (
      exec 9>&-
      if board_is_vm "$b"; then
        board_wait "$b" "$vm_deadline" "$VM_BOOT_TIMEOUT" || exit 1
      elif board_is_foreign "$b"; then
        board_wait "$b" "$emu_deadline" "$EMU_BOOT_TIMEOUT" || exit 1
      else
        board_wait "$b" "$deadline" || exit 1
      fi
      echo "lab: $b up at $(board_ip "$b")$(arch_note "$b") ($(since "$t0") s): $(ssh_board "$b" systemctl is-system-running 2>/dev/null)" >&2
    ) &
    pids+=($!)
  done
  for b in "${pids[@]}"; do wait "$b" || failed=1; done
  ((failed == 0)) || return 1
  log "boot of $* done in $(since "$t0") s"
}

# board_cleanup bN: after power is gone: no cgroup folders, no nspawn
# runtime dirs on the host.
board_cleanup() {
  local d ino f; d=$(board_dir "$1")
  cg_remove "$1"
  rm -rf "/run/systemd/nspawn/propagate/$1" "/run/systemd/nspawn/unix-export/$1"
  # nspawn's image locks: flock()ed files named after the root dir's
  # device:inode (the overlay's root has the upper dir's inode); stale ones only
  if ino=$(stat -c %i "$d/upper" 2>/dev/null); then
    for f in /run/systemd/nspawn/locks/inode-*:"$ino"; do
      flock -n "$f" true 2>/dev/null && rm -f "$f"
    done
  fi
  rm -f "$d/.#root.lck"
}

# board_power_off bN: pull the plug. Link down first (silent, nothing is
# sent), then SIGKILL to every process of the board at once (a VM board:
# qemu, no shutdown); the disk stays.
board_power_off() {
  local b=$1 t0; t0=$(now)
  net_link_down "$b"
  # The moment the power is pulled, for benchmarks (e2e watchFault).
  echo "lab: $b: link down at $(now)"
  if cg_populated "$b"; then
    cg_kill "$b"
    cg_wait_empty "$b" "$KILL_TIMEOUT" || die "$b: processes left in its cgroup after ${KILL_TIMEOUT}s: $(cg_pids "$b" | tr '\n' ' ')"
  fi
  # a nspawn that escaped its cgroup (should not happen): by PID, if it is ours
  local pid; pid=$(cat "$(board_dir "$b")/pid" 2>/dev/null || true)
  if [[ -n $pid ]] && grep -qaF -- "$(board_dir "$b")/" "/proc/$pid/cmdline" 2>/dev/null; then
    kill -9 "$pid" 2>/dev/null || true
  fi
  board_cleanup "$b"
  disk_umount "$b"
  # (down removes the network anyway: RESET_NET=0)
  [[ ${RESET_NET:-1} == 1 && -d $(board_dir "$b") ]] && net_board_reset "$b"
  rm -f "$(board_dir "$b")/pid"
  [[ -d $(board_dir "$b") ]] && echo "--- $(date -Is) power pulled" >>"$(board_dir "$b")/console.log"
  local disk; disk=$(board_dir "$b")/upper
  board_is_vm "$b" && disk=$(board_dir "$b")/disk.qcow2
  log "$b: power off in $(since "$t0") s (disk kept: $disk)"
}

# stray_nspawns: PIDs of systemd-nspawn processes booting a lab board.
stray_nspawns() {
  ps -eo pid=,args= | awk -v d="--directory=$BOARDS_DIR/" '$2 ~ /(^|\/)systemd-nspawn$/ && index($0, d) { print $1 }'
}
