#!/bin/busybox sh
# scripts/lab.d/vm-init.sh: /init of a VM board's initramfs (busybox, arm64),
# built by vm.sh. Loads the virtio and ext4 modules, mounts the board's disk
# (/dev/vda) read-write, writes onto it what the lab handed over in
# /herd-lab (its SSH host key, the lab's key for pi, the lab's /etc/hosts
# block), configures eth0 (fixed address, default route on-link, as on the
# nspawn boards) and hands over to systemd.
# shellcheck shell=sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev

say() { echo "lab-init: $*" >/dev/console; }
fail() {
  say "$*"
  sleep 2
  echo b >/proc/sysrq-trigger
}

while read -r m; do
  insmod "/lib/modules/$m" 2>/dev/null || say "insmod $m failed"
done </lib/modules/load

i=0
while [ ! -b /dev/vda ]; do
  i=$((i + 1))
  [ $i -le 100 ] || fail "no /dev/vda after 10 s"
  sleep 0.1
done
mount -t ext4 -o rw /dev/vda /newroot || fail "cannot mount /dev/vda"
R=/newroot

if [ -d /herd-lab ]; then
  # the host key the lab made for this board (pinned in its known_hosts)
  mkdir -p $R/etc/ssh
  rm -f $R/etc/ssh/ssh_host_ed25519_key $R/etc/ssh/ssh_host_ed25519_key.pub
  cp /herd-lab/ssh_host_ed25519_key /herd-lab/ssh_host_ed25519_key.pub $R/etc/ssh/
  chmod 600 $R/etc/ssh/ssh_host_ed25519_key
  chmod 644 $R/etc/ssh/ssh_host_ed25519_key.pub
  # the lab's key for pi, appended (keys herd adds stay)
  pw=$(grep '^pi:' $R/etc/passwd)
  if [ -n "$pw" ]; then
    uid=$(echo "$pw" | cut -d: -f3)
    gid=$(echo "$pw" | cut -d: -f4)
    home=$(echo "$pw" | cut -d: -f6)
    mkdir -p "$R$home/.ssh"
    touch "$R$home/.ssh/authorized_keys"
    grep -qxF "$(cat /herd-lab/authorized_key)" "$R$home/.ssh/authorized_keys" ||
      cat /herd-lab/authorized_key >>"$R$home/.ssh/authorized_keys"
    chown "$uid:$gid" "$R$home" "$R$home/.ssh" "$R$home/.ssh/authorized_keys"
    chmod 700 "$R$home/.ssh"
    chmod 600 "$R$home/.ssh/authorized_keys"
  fi
  # /etc/hosts: keep what the board wrote itself, replace the lab's block
  if [ -f $R/etc/hosts ]; then
    sed '/^# herd-lab begin/,/^# herd-lab end/d' $R/etc/hosts >/hosts
  else
    printf '127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' >/hosts
  fi
  cat /herd-lab/hosts >>/hosts
  cat /hosts >$R/etc/hosts
  sync
fi

ip link set lo up
i=0
while ! ip link show eth0 >/dev/null 2>&1; do
  i=$((i + 1))
  [ $i -le 100 ] || fail "no eth0 after 10 s"
  sleep 0.1
done
if [ -f /herd-lab/address ]; then
  ip addr add "$(cat /herd-lab/address)" dev eth0
  ip link set eth0 up
  ip route add default dev eth0
fi

umount /proc /sys
mount -o move /dev $R/dev
exec switch_root $R /sbin/init
