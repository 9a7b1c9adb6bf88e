# scripts/lab.d/common.sh: paths, naming, small helpers shared by scripts/lab.
# Sourced, never run. Everything the lab owns is named here, so that `down`
# can find it again after a crash of the lab itself.

LAB_DIR=${HERD_LAB_DIR:-/var/lib/herd-lab}          # boards' disks, keys, known_hosts, ssh_config
CACHE_DIR=${HERD_LAB_CACHE:-/var/cache/herd-lab}    # the shared read-only root and its tarball
SUITE=${HERD_LAB_SUITE:-bookworm}
ARCH=$(dpkg --print-architecture 2>/dev/null || echo amd64)
ROOTFS=$CACHE_DIR/rootfs-$SUITE-$ARCH              # the host's architecture; others: rootfs_dir ARCH
ROOTFS_TAR=$ROOTFS.tar.zst
BOARDS_DIR=$LAB_DIR/boards
KEY=$LAB_DIR/ssh/id_ed25519
KNOWN_HOSTS=$LAB_DIR/known_hosts
SSH_CONFIG=$LAB_DIR/ssh_config
LOCK_FILE=/run/herd-lab.lock

NET=${HERD_LAB_NET:-10.77.0}     # a /24 used only inside the lab
BRIDGE=herdlab0                  # host-side bridge, address $NET.1
HOST_IP=$NET.1
NETNS_PREFIX=herd-               # netns herd-bN
VETH_PREFIX=herdlab-             # host end of board bN's veth: herdlab-bN (the board end is eth0)
PART_PREFIX=herdlab-p            # extra bridges for multi-board partition groups
CG_NAME=herdlab                  # cgroup folder (or herdlab.slice on a systemd host)
MAX_BOARDS=200

BOOT_TIMEOUT=${HERD_LAB_BOOT_TIMEOUT:-60}   # seconds until ssh must answer after boot
KILL_TIMEOUT=${HERD_LAB_KILL_TIMEOUT:-10}   # seconds until a killed board's cgroup must be empty
# boards of another architecture run every program through qemu-user: slower
EMU_BOOT_TIMEOUT=${HERD_LAB_EMU_BOOT_TIMEOUT:-180}

# Bump when prep_rootfs changes: a cached root with another stamp is prepared again.
PREP_VERSION=5

log() { echo "lab: $*" >&2; }
die() { echo "lab: $*" >&2; exit 1; }

# now: seconds since the epoch with microseconds; since T: elapsed seconds, 2 decimals.
now() { echo "${EPOCHREALTIME/,/.}"; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }

require_root() {
  [[ $(id -u) -eq 0 ]] || die "must run as root (it mounts overlays, creates network namespaces and cgroups, and boots containers): sudo $0 $*"
}

# lock: serialise commands that change the lab. fd 9 must never leak into a
# board (launch closes it), or the lock would be held for the board's life.
lock() {
  exec 9>"$LOCK_FILE"
  flock -w 120 9 || die "another scripts/lab is still running (lock $LOCK_FILE)"
}

# board_index bN -> N, or dies with a clear error.
board_index() {
  local b=$1
  [[ $b =~ ^b([1-9][0-9]*)$ ]] || die "bad board name '$b': want b1, b2, ..."
  local i=${BASH_REMATCH[1]}
  ((i <= MAX_BOARDS)) || die "bad board name '$b': at most b$MAX_BOARDS"
  echo "$i"
}
board_ip() { echo "$NET.$((10 + $(board_index "$1")))"; }
board_dir() { echo "$BOARDS_DIR/$1"; }
board_root() { echo "$BOARDS_DIR/$1/root"; }
board_netns() { echo "$NETNS_PREFIX$1"; }
board_veth() { echo "$VETH_PREFIX$1"; }

# Architectures: a board has the host's ($ARCH), unless its disk was made for
# another one (scripts/lab up N --arm64 K): then bN/arch says which, and the
# board's programs run under qemu-user (binfmt_misc).
FOREIGN_ARCHES="arm64"
# rootfs_dir ARCH: the shared root of that architecture.
rootfs_dir() { echo "$CACHE_DIR/rootfs-$SUITE-$1"; }
# board_arch bN: the board's architecture (dpkg name: amd64, arm64).
board_arch() {
  local a
  a=$(cat "$BOARDS_DIR/$1/arch" 2>/dev/null || true)
  echo "${a:-$ARCH}"
}
# qemu_name ARCH: the binfmt_misc entry (and qemu-user binary) for ARCH.
qemu_name() {
  case $1 in
    arm64) echo qemu-aarch64 ;;
    *) die "no qemu-user mapping for architecture '$1' (known: $FOREIGN_ARCHES)" ;;
  esac
}

# known_board bN: dies unless the lab has (or had, with --keep-disks) this board.
known_board() {
  board_index "$1" >/dev/null
  [[ -d $(board_dir "$1") ]] || die "no board $1 in the lab (boards: $(boards | paste -sd ' ')); try: scripts/lab up"
}

# boards: the lab's boards, one a line, in numeric order.
boards() {
  local d
  [[ -d $BOARDS_DIR ]] || return 0
  for d in "$BOARDS_DIR"/b*; do
    [[ -d $d && $(basename "$d") =~ ^b[1-9][0-9]*$ ]] && basename "$d"
  done | sort -V
}

need_cmds() {
  local c missing=()
  for c in "$@"; do command -v "$c" >/dev/null || missing+=("$c"); done
  ((${#missing[@]} == 0)) || die "missing ${missing[*]}: run scripts/lab deps"
}

# ssh_board bN ARGS...: ssh with the lab's config (BatchMode: never prompts).
ssh_board() {
  local b=$1; shift
  ssh -F "$SSH_CONFIG" -o BatchMode=yes "$b" "$@"
}

# Temporary files and directories of this run, removed when the script
# exits, however it exits (lab_tmp VAR [-d]).
LAB_TMPS=()
lab_tmp_cleanup() {
  if ((${#LAB_TMPS[@]})); then rm -rf -- "${LAB_TMPS[@]}"; fi
  return 0
}
trap lab_tmp_cleanup EXIT

# lab_tmp VAR [-d]: VAR = a new temporary file (or directory with -d).
lab_tmp() {
  local __p
  __p=$(mktemp "${@:2}")
  LAB_TMPS+=("$__p")
  printf -v "$1" '%s' "$__p"
}
