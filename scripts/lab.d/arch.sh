# scripts/lab.d/arch.sh: boards of another architecture than the host's
# (arm64 on an amd64 machine). Sourced by scripts/lab.
#
# Such a board is the same kind of board (systemd-nspawn, its own namespace,
# address and disk), booted from a root of its own architecture
# ($CACHE_DIR/rootfs-$SUITE-arm64). systemd-nspawn itself is native; every
# program inside (systemd as PID 1, sshd, herd) is an arm64 executable that
# the kernel hands to qemu-user through binfmt_misc. With the F ("fix
# binary") flag the kernel opens the interpreter once, at registration, so it
# works inside the board's root without a copy; without it the lab copies the
# interpreter into the root at the path the binfmt entry names.
#
# bN/arch   the board's architecture when it is not the host's (absent: host)

# binfmt_entry ARCH: the binfmt_misc entry file of ARCH's qemu-user.
binfmt_entry() { echo "/proc/sys/fs/binfmt_misc/$(qemu_name "$1")"; }

# binfmt_ready ARCH: the kernel runs ARCH's executables through qemu-user.
binfmt_ready() { grep -qx enabled "$(binfmt_entry "$1")" 2>/dev/null; }

# binfmt_setup ARCH: mount binfmt_misc if needed and register + enable ARCH's
# qemu-user (binfmt-support's update-binfmts). Works without systemd as PID 1.
binfmt_setup() {
  local q bm=/proc/sys/fs/binfmt_misc
  q=$(qemu_name "$1")
  binfmt_ready "$1" && return 0
  command -v update-binfmts >/dev/null || return 1
  if [[ ! -e $bm/register ]]; then
    mount -t binfmt_misc binfmt_misc "$bm" 2>/dev/null || return 1
  fi
  # --import: a format binfmt-support knows but the kernel lost (a fresh
  # binfmt_misc mount); --enable switches it on
  update-binfmts --import "$q" >/dev/null 2>&1 || true
  update-binfmts --enable "$q" >/dev/null 2>&1 || true
  binfmt_ready "$1"
}

# binfmt_ensure ARCH: binfmt_setup, or die saying what to do.
binfmt_ensure() {
  binfmt_setup "$1" && return 0
  die "this machine cannot run $1 programs: $(binfmt_entry "$1") is not enabled (run scripts/lab deps --arm64: qemu-user-static, binfmt-support, binfmt_misc)"
}

# binfmt_flags ARCH / binfmt_interpreter ARCH: of the registered entry.
binfmt_flags() { awk '$1 == "flags:" { print $2 }' "$(binfmt_entry "$1")" 2>/dev/null; }
binfmt_interpreter() { awk '$1 == "interpreter" { print $2 }' "$(binfmt_entry "$1")" 2>/dev/null; }

# emu_interpreter_in_root DIR ARCH: without the F flag the kernel looks the
# interpreter up inside the board's root at exec time: copy it there (the
# static qemu, dereferenced) unless it is there already.
emu_interpreter_in_root() {
  local r=$1 flags interp
  flags=$(binfmt_flags "$2") interp=$(binfmt_interpreter "$2")
  [[ $flags == *F* ]] && return 0
  [[ -n $interp && -e $interp ]] || die "binfmt entry of $2 names no usable interpreter ($(binfmt_entry "$2"))"
  if ! cmp -s "$interp" "$r$interp" 2>/dev/null; then
    log "binfmt $2 has no F flag: copying $interp into $r"
    mkdir -p "$r$(dirname "$interp")"
    cp -L "$interp" "$r$interp.tmp" && mv "$r$interp.tmp" "$r$interp"
  fi
}

# emu_debootstrap DIR ARCH MIRROR: debootstrap's first stage natively
# (download + unpack), the second (dpkg configuring every package) inside the
# root through qemu-user. Same packages as the host's root.
emu_debootstrap() {
  local tmp=$1 arch=$2 mirror=$3 t0 rc=0 m
  local dlog=$CACHE_DIR/debootstrap-$arch.log
  t0=$(now)
  log "building the $arch root: debootstrap --foreign $SUITE $arch from $mirror, second stage under qemu-user (several minutes; cached afterwards)"
  debootstrap --foreign --variant=minbase --arch="$arch" --include="$ROOTFS_PACKAGES" \
    "$SUITE" "$tmp" "$mirror" >"$dlog" 2>&1 ||
    die "debootstrap (first stage, $arch) failed: see $dlog"
  log "debootstrap first stage done in $(since "$t0") s"
  emu_interpreter_in_root "$tmp" "$arch"
  local t1; t1=$(now)
  echo "--- second stage (chroot, qemu-user)" >>"$dlog"
  chroot "$tmp" /debootstrap/debootstrap --second-stage >>"$dlog" 2>&1 || rc=$?
  # the second stage mounts /proc and /sys in the root; a failed one may leave them
  for m in $(mounts_under "$tmp"); do umount "$m" 2>/dev/null || umount -l "$m" || true; done
  ((rc == 0)) || die "debootstrap (second stage, $arch, under qemu-user) failed: see $dlog"
  log "debootstrap second stage done in $(since "$t1") s ($arch total $(since "$t0") s)"
}

# emu_prep_rootfs DIR ARCH: what a root needs only because its programs run
# under qemu-user (before prep_rootfs, which stamps the root).
emu_prep_rootfs() {
  local r=$1 u
  emu_interpreter_in_root "$r" "$2"
  # Setting up a service's credentials (LoadCredential=) fails under
  # qemu-user ("Failed to set up credentials: Invalid argument", status
  # 243/CREDENTIALS). None of these credentials is ever passed to a board,
  # so the units run without them (rather than being masked).
  for u in systemd-sysusers systemd-tmpfiles-setup systemd-tmpfiles-setup-dev systemd-tmpfiles-clean \
    systemd-sysctl procps systemd-firstboot; do
    [[ -f $r/lib/systemd/system/$u.service ]] || continue
    mkdir -p "$r/etc/systemd/system/$u.service.d"
    cat >"$r/etc/systemd/system/$u.service.d/herd-lab-emu.conf" <<'EOF'
# scripts/lab: credentials cannot be set up under qemu-user; none are passed.
[Service]
LoadCredential=
EOF
  done
  echo "$2" >"$r/etc/herd-lab-arch"
}

# Which board gets which architecture: `up N --vm J` (or HERD_LAB_VM=J)
# makes the last J of b1..bN VM boards (arm64-vm, see vm.sh), and `--arm64
# K` (or HERD_LAB_ARM64=K) the last K of the others arm64 nspawn boards. A
# board's architecture is fixed when its disk is made; asking for another one
# for an existing disk is an error (scripts/lab down removes the disks).
# Without --arm64, existing boards that are not VMs keep theirs and new ones
# get the host's.
declare -A UP_ARCH=()

# board_has_disk bN: the board's disk exists (an nspawn upper dir or a VM's qcow2).
board_has_disk() { [[ -d $(board_dir "$1")/upper || -f $(board_dir "$1")/disk.qcow2 ]]; }

# up_plan_arch N K J: fill UP_ARCH for b1..bN (K arm64, J VM boards; K
# empty: keep existing disks' architecture); dies on a conflict with a disk.
up_plan_arch() {
  local n=$1 k=$2 j=${3:-0} i b want have bad=()
  for ((i = 1; i <= n; i++)); do
    b=b$i want=$ARCH have=""
    board_has_disk "$b" && have=$(board_arch "$b")
    if ((i > n - j)); then
      want=$VM_KIND
    elif [[ -n $k ]]; then
      ((i > n - j - k)) && want=arm64
    elif [[ -n $have && $have != "$VM_KIND" ]]; then
      want=$have
    fi
    [[ -z $have || $have == "$want" ]] || bad+=("$b is $have, not $want")
    UP_ARCH[$b]=$want
  done
  ((${#bad[@]} == 0)) || die "up: boards keep the architecture of their disk: $(printf '%s; ' "${bad[@]}")scripts/lab down removes the disks"
}

# planned_arch bN: the architecture bN gets (planned by up) or has.
planned_arch() { echo "${UP_ARCH[$1]:-$(board_arch "$1")}"; }

# board_set_arch bN: record the planned architecture in the board's dir.
board_set_arch() {
  [[ -n ${UP_ARCH[$1]:-} ]] || return 0
  if [[ ${UP_ARCH[$1]} == "$ARCH" ]]; then rm -f "$(board_dir "$1")/arch"; else echo "${UP_ARCH[$1]}" >"$(board_dir "$1")/arch"; fi
}

# boards_ensure_foreign_roots bN...: binfmt and the shared root of every
# foreign architecture among these boards; the VM images for VM boards.
boards_ensure_foreign_roots() {
  local b a seen=" "
  for b in "$@"; do
    a=$(planned_arch "$b")
    [[ $a == "$ARCH" || $seen == *" $a "* ]] && continue
    seen+="$a "
    if [[ $a == "$VM_KIND" ]]; then vm_ensure_images; else ensure_rootfs "$a"; fi
  done
}

# board_is_foreign bN: the board's programs run under qemu-user.
board_is_foreign() { [[ $(board_arch "$1") != "$ARCH" ]]; }

# arch_note bN: " (arm64)" for a foreign board, nothing for the host's.
arch_note() { board_is_foreign "$1" && echo " ($(board_arch "$1"))"; return 0; }
