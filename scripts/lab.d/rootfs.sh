# scripts/lab.d/rootfs.sh: the shared, read-only Debian root every board's
# overlay sits on. Sourced by scripts/lab.
#
# $ROOTFS        debootstrap --variant=minbase + prep_rootfs; never written
#                while a board is mounted on it
# $ROOTFS.tar.zst the same, saved; restoring it takes seconds, not a minute
# $ROOTFS/etc/herd-lab-rootfs  stamp: "prep N", N = PREP_VERSION

ROOTFS_PACKAGES=systemd,systemd-sysv,dbus,openssh-server,iproute2,python3,procps,iputils-ping,ca-certificates,sudo

# root_missing_packages DIR: the packages of ROOTFS_PACKAGES the root in DIR
# lacks (a root cached before a package was added is built afresh).
root_missing_packages() {
  local p
  for p in ${ROOTFS_PACKAGES//,/ }; do
    grep -qx "Package: $p" "$1/var/lib/dpkg/status" 2>/dev/null || echo "$p"
  done
}

# apt_mirror: the Debian mirror apt uses on this machine (for $SUITE), from
# /etc/apt/sources.list and sources.list.d (one-line and deb822 formats).
apt_mirror() {
  [[ -n ${HERD_LAB_MIRROR:-} ]] && { echo "$HERD_LAB_MIRROR"; return; }
  apt_mirror_from /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources |
    grep . || echo http://deb.debian.org/debian
}

# apt_mirror_from FILE...: the first http(s) URI serving $SUITE in FILEs.
apt_mirror_from() {
  local f
  for f in "$@"; do
    [[ -f $f ]] || continue
    awk -v suite="$SUITE" '
      function out(u) { if (u ~ /^https?:\/\//) { print u; found = 1; exit } }
      /^[ \t]*deb[ \t]/ {                      # one-line: deb [opts] URI SUITE COMPONENTS
        n = split($0, w, /[ \t]+/); i = 2
        if (w[i] ~ /^\[/) { while (i <= n && w[i] !~ /\]$/) i++; i++ }
        if (w[i + 1] == suite) out(w[i])
        next
      }
      /^[ \t]*$/ { if (uri != "" && suites ~ ("(^| )" suite "( |$)") && types ~ /(^| )deb( |$)/) out(uri); uri = suites = types = ""; next }
      /^URIs:/    { uri = $2 }
      /^Suites:/  { $1 = ""; suites = substr($0, 2) }
      /^Types:/   { $1 = ""; types = substr($0, 2) }
      END { if (!found && uri != "" && suites ~ ("(^| )" suite "( |$)") && types ~ /(^| )deb( |$)/) print uri }
    ' "$f" | head -1
  done | head -1
}

rootfs_ready() { grep -qx "prep $PREP_VERSION" "$ROOTFS/etc/herd-lab-rootfs" 2>/dev/null; }

# rootfs_in_use: true while any overlay of the lab has the root as lower dir.
rootfs_in_use() { grep -qE "lowerdir=([^,]*:)?${ROOTFS}(,|:| |$)" /proc/self/mountinfo; }

# ensure_rootfs [ARCH]: build (debootstrap), restore (tarball) or re-prepare
# the shared root of ARCH (default: the host's), whichever is needed; nothing
# when it is ready. A foreign ARCH (arm64) is built and run through qemu-user:
# see arch.sh.
ensure_rootfs() {
  local arch=${1:-$ARCH}
  if [[ $arch != "$ARCH" ]]; then
    # the functions below see this architecture's root (dynamic scope)
    local ROOTFS ROOTFS_TAR
    ROOTFS=$(rootfs_dir "$arch") ROOTFS_TAR=$(rootfs_dir "$arch").tar.zst
    binfmt_ensure "$arch"
    [[ -d $ROOTFS ]] && ! rootfs_in_use && emu_interpreter_in_root "$ROOTFS" "$arch"
  fi
  if [[ -d $ROOTFS ]] && ! rootfs_in_use && [[ -n $(root_missing_packages "$ROOTFS") ]]; then
    log "the cached root lacks $(root_missing_packages "$ROOTFS" | tr '\n' ' ')- building it afresh"
    rm -rf --one-file-system "$ROOTFS" "$ROOTFS_TAR"
  fi
  if rootfs_ready; then
    [[ -f $ROOTFS_TAR ]] || save_rootfs_tar
    return 0
  fi
  if rootfs_in_use; then
    log "warning: $ROOTFS is not prepared for this scripts/lab (prep $PREP_VERSION) but boards are mounted on it; run scripts/lab down first to refresh it"
    return 0
  fi
  local t0; t0=$(now)
  mkdir -p "$CACHE_DIR"
  if [[ ! -d $ROOTFS ]]; then
    local tmp=$ROOTFS.tmp
    rm -rf --one-file-system "$tmp"
    mkdir -p "$tmp"
    if [[ -f $ROOTFS_TAR ]]; then
      log "restoring the root from $ROOTFS_TAR"
      zstd -dc -q "$ROOTFS_TAR" | tar -C "$tmp" --numeric-owner --xattrs --xattrs-include='*' -xpf - ||
        die "could not unpack $ROOTFS_TAR (remove it to build afresh)"
    fi
    if [[ -f $ROOTFS_TAR && -n $(root_missing_packages "$tmp") ]]; then
      log "$ROOTFS_TAR lacks $(root_missing_packages "$tmp" | tr '\n' ' ')- building the root afresh"
      rm -rf --one-file-system "$tmp" "$ROOTFS_TAR"
      mkdir -p "$tmp"
    fi
    if [[ -f $ROOTFS_TAR ]]; then
      : # restored above
    elif [[ $arch != "$ARCH" ]]; then
      need_cmds debootstrap chroot
      emu_debootstrap "$tmp" "$arch" "$(apt_mirror)"
    else
      need_cmds debootstrap
      local mirror; mirror=$(apt_mirror)
      log "building the root: debootstrap $SUITE $ARCH from $mirror (about a minute; cached afterwards)"
      debootstrap --variant=minbase --arch="$ARCH" --include="$ROOTFS_PACKAGES" \
        "$SUITE" "$tmp" "$mirror" >"$CACHE_DIR/debootstrap.log" 2>&1 ||
        die "debootstrap failed: see $CACHE_DIR/debootstrap.log"
      log "debootstrap done in $(since "$t0") s"
    fi
    mv "$tmp" "$ROOTFS"
  fi
  if ! rootfs_ready; then
    [[ $arch != "$ARCH" ]] && emu_prep_rootfs "$ROOTFS" "$arch"
    prep_rootfs "$ROOTFS"
    save_rootfs_tar
  fi
  log "root ready in $(since "$t0") s: $ROOTFS ($(du -sh "$ROOTFS" | cut -f1))"
}

save_rootfs_tar() {
  local t1; t1=$(now)
  tar -C "$ROOTFS" --numeric-owner --xattrs --xattrs-include='*' -cf - . | zstd -q -T0 -3 -f -o "$ROOTFS_TAR.tmp"
  mv "$ROOTFS_TAR.tmp" "$ROOTFS_TAR"
  log "saved $ROOTFS_TAR ($(du -h "$ROOTFS_TAR" | cut -f1)) in $(since "$t1") s"
}

# prep_rootfs DIR: what every board shares. Idempotent. Per-board identity
# (host key, machine-id, hostname, authorized key) is NOT here: see provision.
prep_rootfs() {
  local r=$1 u
  # identity comes per board: hostname from -M, machine-id on first boot,
  # host keys generated by the lab into the board's own disk
  rm -f "$r/etc/hostname" "$r"/etc/ssh/ssh_host_*
  : >"$r/etc/machine-id"
  mkdir -p "$r/var/lib/dbus"
  ln -sfn /etc/machine-id "$r/var/lib/dbus/machine-id"

  # nothing that wakes up to talk to the internet or scrub disks; no network
  # managers: eth0 is configured from the host and must stay as it is
  mkdir -p "$r/etc/systemd/system"
  for u in apt-daily.service apt-daily.timer apt-daily-upgrade.service apt-daily-upgrade.timer \
    e2scrub_all.service e2scrub_all.timer e2scrub_reap.service fstrim.service fstrim.timer \
    dpkg-db-backup.service dpkg-db-backup.timer \
    systemd-networkd.service systemd-networkd.socket systemd-networkd-wait-online.service \
    systemd-resolved.service systemd-timesyncd.service \
    console-getty.service getty@.service serial-getty@.service; do
    ln -sfn /dev/null "$r/etc/systemd/system/$u"
  done

  # journal: persistent on the board's own disk (its overlay), small
  mkdir -p "$r/etc/systemd/journald.conf.d" "$r/var/log/journal"
  cat >"$r/etc/systemd/journald.conf.d/herd-lab.conf" <<'EOF'
# scripts/lab: the journal lives on the board's own disk, like an SD card.
[Journal]
Storage=persistent
SystemMaxUse=16M
RuntimeMaxUse=8M
EOF

  # sshd: keys only, one ed25519 host key the lab generated and pinned
  mkdir -p "$r/etc/ssh/sshd_config.d"
  cat >"$r/etc/ssh/sshd_config.d/herd-lab.conf" <<'EOF'
# scripts/lab: the board's host key is generated per board by the lab and
# pinned in its known_hosts; root logs in with a key only.
HostKey /etc/ssh/ssh_host_ed25519_key
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UseDNS no
EOF
  install -d -m 700 "$r/root/.ssh"

  # a first user like Raspberry Pi OS's: pi, passwordless sudo, no password
  # (keys only; provision adds the lab's key to ~pi/.ssh/authorized_keys).
  # useradd -R works on the root's files without running its programs, so
  # a foreign architecture's root is fine.
  grep -q '^pi:' "$r/etc/passwd" ||
    useradd -R "$r" --create-home --user-group --groups sudo --shell /bin/bash --password '*' pi
  echo 'pi ALL=(ALL) NOPASSWD: ALL' >"$r/etc/sudoers.d/010_pi-nopasswd"
  chmod 0440 "$r/etc/sudoers.d/010_pi-nopasswd"
  local pi_ids; pi_ids=$(awk -F: '$1 == "pi" { print $3 ":" $4 }' "$r/etc/passwd")
  install -d -m 700 -o "${pi_ids%:*}" -g "${pi_ids#*:}" "$r/home/pi/.ssh"

  # quiets pam_env on every ssh login
  [[ -f $r/etc/default/locale ]] || echo 'LANG=C.UTF-8' >"$r/etc/default/locale"

  rm -f "$r"/var/cache/apt/archives/*.deb "$r"/var/cache/apt/*.bin
  echo "prep $PREP_VERSION" >"$r/etc/herd-lab-rootfs"
}
