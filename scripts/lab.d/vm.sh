# scripts/lab.d/vm.sh: VM boards, full-system arm64 machines with their own
# kernel (qemu-system-aarch64 -M virt, TCG), set up like a stock Raspberry Pi
# OS Lite board: user pi with passwordless sudo, no root login,
# cgroup_disable=memory on the kernel command line. Sourced by scripts/lab.
#
# Cached, built once ($VM_CACHE):
#   vmlinuz       Debian's arm64 kernel (linux-image-arm64's current version,
#                 apt-get download + dpkg-deb -x on the host)
#   initrd.img    a small busybox initramfs built on the host: busybox-static
#                 (arm64), the virtio/ext4 modules of that kernel, lab-init
#   base.img      raw ext4 (sparse), mkfs.ext4 -d from the lab's arm64 root
#                 plus the kernel's modules, sudo, the pi user, PermitRootLogin no
#   stamp         what they were built from; a stale set is rebuilt while no
#                 board's disk sits on it
# Per board ($BOARDS_DIR/bN):
#   arch          "arm64-vm"
#   disk.qcow2    the board's own disk: a qcow2 overlay on base.img
#   ssh/          its SSH host key, made by the lab (pinned in known_hosts)
#   initrd.img    initrd.img + a cpio of what makes the board itself (host
#                 key, the lab's key for pi, /etc/hosts block, address),
#                 written onto its disk by lab-init at every boot
#   console.log   the serial console (ttyAMA0), all boots appended
#   pid           qemu's PID (informational; the cgroup is the truth)
# Network: a tap device herdlab-bN (the name of an nspawn board's host end)
# on the lab bridge; the guest's eth0 has the board's fixed MAC and address,
# set by lab-init before systemd starts (no network manager runs inside).

VM_KIND=arm64-vm                 # board_arch of a VM board
VM_ARCH=arm64                    # its dpkg architecture
VM_CACHE=$CACHE_DIR/vm-$SUITE-$VM_ARCH
VM_PREP_VERSION=2                # bump when vm_build's output changes
VM_BOOT_TIMEOUT=${HERD_LAB_VM_BOOT_TIMEOUT:-240}
VM_MEM=${HERD_LAB_VM_MEM:-1024}  # MiB per VM board
VM_CPUS=${HERD_LAB_VM_CPUS:-2}
VM_DISK_SIZE=${HERD_LAB_VM_DISK_SIZE:-4G}
# the kernel command line, like a Pi's cmdline.txt without cgroup_enable=memory
VM_CMDLINE="console=ttyAMA0 root=/dev/vda rw net.ifnames=0 cgroup_disable=memory panic=5 loglevel=4"
# modules lab-init loads before mounting the root (with their dependencies)
VM_INITRD_MODULES="virtio_pci virtio_blk virtio_net virtio_rng crc32c_generic ext4"
# installed into the VM disk when the lab's arm64 root lacks them
VM_PACKAGES="sudo kmod udev"

board_is_vm() { [[ $(board_arch "$1") == "$VM_KIND" ]]; }
# board_user bN: who the lab logs in as (VM boards: no root login).
board_user() { if board_is_vm "$1"; then echo pi; else echo root; fi; }

vm_stamp_want() {
  echo "vm $VM_PREP_VERSION root $(cat "$(rootfs_dir "$VM_ARCH")/etc/herd-lab-rootfs" 2>/dev/null)"
}
vm_images_ready() {
  [[ -f $VM_CACHE/vmlinuz && -f $VM_CACHE/initrd.img && -f $VM_CACHE/base.img ]] &&
    [[ $(head -1 "$VM_CACHE/stamp" 2>/dev/null) == "$(vm_stamp_want)" ]]
}
# vm_disks_exist: some board's disk sits on the cached base image.
vm_disks_exist() { local f; for f in "$BOARDS_DIR"/b*/disk.qcow2; do [[ -f $f ]] && return 0; done; return 1; }

# vm_ensure_images: kernel, initrd and base image in the cache (built if
# missing or stale; a stale set with disks on it is kept, with a warning).
vm_ensure_images() {
  if [[ -f $VM_CACHE/base.img ]] && ! vm_images_ready && vm_disks_exist; then
    log "warning: $VM_CACHE was built from another root or scripts/lab ($(head -1 "$VM_CACHE/stamp" 2>/dev/null), want $(vm_stamp_want)) but board disks sit on it; scripts/lab down to rebuild it"
    return 0
  fi
  vm_images_ready && return 0
  ensure_rootfs "$VM_ARCH"
  vm_images_ready || vm_build
}

# vm_apt_download DIR PKG...: apt-get download PKG:arm64 (the candidate
# version) into DIR.
vm_apt_download() {
  local dir=$1 p v; shift
  for p in "$@"; do
    v=$(apt-cache policy "$p:$VM_ARCH" 2>/dev/null | awk '$1 == "Candidate:" { print $2 }')
    [[ -n $v && $v != "(none)" ]] || die "no $p:$VM_ARCH in apt's lists: run scripts/lab deps --vm (dpkg --add-architecture $VM_ARCH; apt-get update)"
    (cd "$dir" && apt-get download -q -o APT::Sandbox::User=root "$p:$VM_ARCH=$v") >>"$dir/apt.log" 2>&1 ||
      die "apt-get download $p:$VM_ARCH=$v failed: see $dir/apt.log"
  done
}

# vm_build: the cached kernel, initrd and base image, from the mirror and
# the lab's arm64 root ($(rootfs_dir arm64), built first if needed).
vm_build() {
  need_cmds qemu-img mkfs.ext4 cpio gzip depmod modprobe dpkg-deb apt-get apt-cache chroot
  local t0 tmp=$VM_CACHE.tmp kpkg ver root
  t0=$(now)
  log "building the VM images in $VM_CACHE (kernel, initrd, base disk; a few minutes, cached afterwards)"
  rm -rf --one-file-system "$tmp"
  mkdir -p "$tmp/deb"
  # linux-image-arm64 is a meta-package: its one dependency is the kernel
  vm_apt_download "$tmp/deb" linux-image-arm64 busybox-static
  kpkg=$(dpkg-deb -f "$tmp"/deb/linux-image-arm64_*.deb Depends | sed -n 's/^\(linux-image-[^ ,]*\).*/\1/p')
  [[ -n $kpkg ]] || die "linux-image-arm64:$VM_ARCH names no kernel package"
  vm_apt_download "$tmp/deb" "$kpkg"
  mkdir -p "$tmp/kernel" "$tmp/busybox"
  dpkg-deb -x "$tmp"/deb/"$kpkg"_*.deb "$tmp/kernel"
  dpkg-deb -x "$tmp"/deb/busybox-static_*.deb "$tmp/busybox"
  ver=${kpkg#linux-image-}
  [[ -d $tmp/kernel/lib/modules/$ver && -f $tmp/kernel/boot/vmlinuz-$ver ]] || die "$kpkg has no vmlinuz-$ver or modules"
  depmod -b "$tmp/kernel" "$ver"
  cp "$tmp/kernel/boot/vmlinuz-$ver" "$tmp/vmlinuz"
  log "kernel $ver ($(since "$t0") s)"

  vm_build_initrd "$tmp" "$ver"

  # the base disk: a copy of the arm64 root (the shared one stays as it is)
  root=$tmp/root
  cp -a "$(rootfs_dir "$VM_ARCH")" "$root"
  vm_prep_root "$root" "$tmp" "$ver"
  truncate -s "$VM_DISK_SIZE" "$tmp/base.img"
  mkfs.ext4 -q -F -L herd-root -d "$root" "$tmp/base.img" || die "mkfs.ext4 -d $root failed"
  rm -rf --one-file-system "$root" "$tmp/kernel"
  log "base disk $VM_DISK_SIZE ($(du -h "$tmp/base.img" | cut -f1) used) ($(since "$t0") s)"

  mkdir -p "$VM_CACHE"
  mv "$tmp/vmlinuz" "$tmp/initrd.img" "$tmp/base.img" "$VM_CACHE/"
  { vm_stamp_want; echo "kernel $ver"; echo "built $(date -Is) in $(since "$t0") s"; } >"$VM_CACHE/stamp"
  rm -rf --one-file-system "$tmp"
  log "VM images ready in $(since "$t0") s: $VM_CACHE"
}

# vm_build_initrd TMP VER: TMP/initrd.img, busybox + modules + lab-init.
vm_build_initrd() {
  local tmp=$1 ver=$2 i=$1/initrd m line
  mkdir -p "$i"/{bin,dev,proc,sys,newroot,lib/modules}
  cp "$tmp/busybox/bin/busybox" "$i/bin/busybox"
  : >"$i/lib/modules/load"
  for m in $VM_INITRD_MODULES; do
    # "insmod /path" for every module in dependency order (softdeps too)
    while read -r line; do
      [[ $line == insmod\ * ]] || continue
      line=${line#insmod }
      line=${line%% *}
      local f=${line##*/}
      grep -qxF "$f" "$i/lib/modules/load" && continue
      cp "$line" "$i/lib/modules/$f"
      echo "$f" >>"$i/lib/modules/load"
    done < <(modprobe -d "$tmp/kernel" -S "$ver" --show-depends "$m" 2>/dev/null)
  done
  grep -qx 'ext4.ko' "$i/lib/modules/load" || die "initrd: ext4.ko not found in the kernel package"
  cp "$here/lab.d/vm-init.sh" "$i/init"
  chmod 755 "$i/init"
  (cd "$i" && find . | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) | gzip -1 >"$tmp/initrd.img"
  rm -rf "$i"
}

# vm_pkg_installed ROOT PKG: dpkg's database in ROOT has PKG installed.
vm_pkg_installed() {
  awk -v p="$2" '/^Package: / { cur = $2 } /^Status: / && cur == p && /install ok installed/ { found = 1 } END { exit !found }' "$1/var/lib/dpkg/status"
}

# vm_prep_root ROOT TMP VER: ROOT (a copy of the lab's arm64 root) made into a
# VM board's disk. Idempotent.
vm_prep_root() {
  local r=$1 tmp=$2 ver=$3 f
  # the kernel's modules (systemd and udev load what they need); no kernel
  # package inside: it would run mkinitramfs under emulation
  mkdir -p "$r/usr/lib/modules"
  cp -a "$tmp/kernel/lib/modules/$ver" "$r/usr/lib/modules/"
  # a real kernel: credentials work, the qemu-user drop-ins go
  for f in "$r"/etc/systemd/system/*.service.d/herd-lab-emu.conf; do
    rm -f "$f"
    rmdir "$(dirname "$f")" 2>/dev/null || true
  done
  # sudo, like Raspberry Pi OS Lite; kmod and udev, which a container does
  # without but a machine with its own kernel needs (modprobe for the
  # kernel's module requests, devices): those the root lacks, installed by
  # its own dpkg (under qemu-user)
  local p missing=()
  for p in $VM_PACKAGES; do vm_pkg_installed "$r" "$p" || missing+=("$p"); done
  if ((${#missing[@]})); then
    log "VM disk: installing ${missing[*]}"
    mkdir -p "$tmp/deb/extra" "$r/tmp/herd-lab-debs"
    vm_apt_download "$tmp/deb/extra" "${missing[@]}"
    cp "$tmp"/deb/extra/*.deb "$r/tmp/herd-lab-debs/"
    chroot "$r" sh -c 'dpkg -i /tmp/herd-lab-debs/*.deb' >>"$tmp/deb/apt.log" 2>&1 ||
      die "installing ${missing[*]} into the VM disk failed: see $tmp/deb/apt.log"
    rm -rf "$r/tmp/herd-lab-debs"
  fi
  if ! grep -q '^pi:' "$r/etc/passwd"; then
    chroot "$r" useradd -m -s /bin/bash -G sudo -c 'pi (herd lab, like Raspberry Pi OS)' pi ||
      die "useradd pi in the VM disk failed"
  fi
  # no password (pi logs in with a key) but not locked
  chroot "$r" usermod -p '*' pi
  chroot "$r" usermod -aG sudo pi
  install -d -m 750 "$r/etc/sudoers.d"
  echo 'pi ALL=(ALL) NOPASSWD: ALL' >"$r/etc/sudoers.d/010_pi-nopasswd"
  chmod 440 "$r/etc/sudoers.d/010_pi-nopasswd"
  chroot "$r" visudo -cq >/dev/null || die "visudo -c fails in the VM disk"
  # sshd reads sshd_config.d in order and the first value wins
  cat >"$r/etc/ssh/sshd_config.d/00-herd-lab-vm.conf" <<'EOF'
# scripts/lab, VM board: like Raspberry Pi OS, no root login; pi has sudo.
PermitRootLogin no
EOF
  echo "$VM_KIND $VM_PREP_VERSION kernel $ver" >"$r/etc/herd-lab-vm"
  rm -f "$r"/var/cache/apt/archives/*.deb
}

# vm_net_up bN [down]: the board's tap device on the lab bridge (or its
# partition group), its fixed host-side MAC; up unless cut off or asked down.
vm_net_up() {
  local b=$1 want=${2:-up} tap group
  tap=$(board_veth "$b")
  if ip link show "$tap" &>/dev/null && ! ip -d link show "$tap" | grep -q 'tun type tap'; then
    ip link del "$tap"
  fi
  ip link show "$tap" &>/dev/null || ip tuntap add dev "$tap" mode tap
  ip link set "$tap" address "$(host_mac "$b")"
  group=$(cat "$(board_dir "$b")/partition" 2>/dev/null || true)
  if [[ $group == "$PART_PREFIX"* ]] && ip link show "$group" &>/dev/null; then
    ip link set "$tap" master "$group"
  else
    ip link set "$tap" master "$BRIDGE"
  fi
  if [[ $group == alone || $want == down ]]; then ip link set "$tap" down; else ip link set "$tap" up; fi
}

# vm_host_key bN: the board's SSH host key, made by the lab once.
vm_host_key() {
  local k; k=$(board_dir "$1")/ssh/ssh_host_ed25519_key
  [[ -f $k && -f $k.pub ]] && return 0
  install -d -m 700 "$(dirname "$k")"
  rm -f "$k" "$k.pub"
  ssh-keygen -q -t ed25519 -N '' -C "root@$1" -f "$k"
}

# vm_initrd bN: the board's initrd: the cached one + a cpio of what makes
# the board itself (lab-init writes it onto the board's disk).
vm_initrd() {
  local b=$1 d s x; d=$(board_dir "$1")
  lab_tmp s -d
  mkdir -p "$s/herd-lab"
  cp "$d/ssh/ssh_host_ed25519_key" "$d/ssh/ssh_host_ed25519_key.pub" "$s/herd-lab/"
  cp "$KEY.pub" "$s/herd-lab/authorized_key"
  echo "$(board_ip "$b")/24" >"$s/herd-lab/address"
  {
    echo "# herd-lab begin (rewritten by scripts/lab at each boot)"
    printf '%s\t%s\n' "$HOST_IP" herdlab-host
    for x in $(boards); do printf '%s\t%s\n' "$(board_ip "$x")" "$x"; done
    echo "# herd-lab end"
  } >"$s/herd-lab/hosts"
  {
    cat "$VM_CACHE/initrd.img"
    (cd "$s" && find herd-lab | cpio -o -H newc -R 0:0 --quiet) | gzip -1
  } >"$d/initrd.img.tmp"
  chmod 600 "$d/initrd.img.tmp"
  mv "$d/initrd.img.tmp" "$d/initrd.img"
  rm -rf "$s"
}

# vm_start bN: power on a VM board (no wait): tap up, disk made on first
# boot, qemu started in the board's cgroup.
vm_start() {
  local b=$1 d pid mac; d=$(board_dir "$1")
  need_cmds qemu-system-aarch64 qemu-img cpio gzip
  [[ -f $VM_CACHE/vmlinuz ]] || die "$b: no VM images in $VM_CACHE (scripts/lab up builds them)"
  board_cleanup "$b"
  mkdir -p "$d"
  vm_net_up "$b"
  if [[ ! -f $d/disk.qcow2 ]]; then
    qemu-img create -q -f qcow2 -F raw -b "$VM_CACHE/base.img" "$d/disk.qcow2.tmp" || die "$b: qemu-img create failed"
    mv "$d/disk.qcow2.tmp" "$d/disk.qcow2"
  fi
  vm_host_key "$b"
  vm_initrd "$b"
  mac=$(board_mac "$b")
  echo "--- $(date -Is) power on" >>"$d/console.log"
  pid=$(cg_launch "$b" "$d/console.log" \
    qemu-system-aarch64 -name "$b" -M virt -cpu cortex-a72 -smp "$VM_CPUS" -m "$VM_MEM" \
    -nodefaults -no-user-config -display none -monitor none -serial stdio \
    -kernel "$VM_CACHE/vmlinuz" -initrd "$d/initrd.img" \
    -append "$VM_CMDLINE systemd.hostname=$b" \
    -drive "if=none,id=disk,file=$d/disk.qcow2,format=qcow2,cache=writeback,discard=unmap" \
    -device virtio-blk-pci,drive=disk \
    -netdev "tap,id=net,ifname=$(board_veth "$b"),script=no,downscript=no" \
    -device "virtio-net-pci,netdev=net,mac=$mac,romfile=" \
    -device virtio-rng-pci) ||
    die "could not start $b: see $d/console.log"
  echo "$pid" >"$d/pid"
}

# vm_net_reset bN: after a power pull: the tap stays, down until the next boot.
vm_net_reset() { vm_net_up "$1" down; }

# stray_qemus [bN]: PIDs of qemu processes running a lab board's disk (of bN).
stray_qemus() {
  local d="file=$BOARDS_DIR/"
  [[ -n ${1:-} ]] && d="file=$(board_dir "$1")/disk.qcow2,"
  ps -eo pid=,args= | awk -v d="$d" '$2 ~ /(^|\/)qemu-system-/ && index($0, d) { print $1 }'
}

# ssh_board_root bN CMD: CMD (a shell string) as root on the board: directly
# on an nspawn board, through sudo -n as pi on a VM board.
ssh_board_root() {
  local b=$1; shift
  if board_is_vm "$b"; then
    ssh_board "$b" "sudo -n bash -c $(printf '%q' "$*")"
  else
    ssh_board "$b" "$*"
  fi
}
