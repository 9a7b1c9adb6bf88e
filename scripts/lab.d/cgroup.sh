# scripts/lab.d/cgroup.sh: one cgroup per board, so that a board can be
# powered off as a whole (every process of it, nspawn included) and its
# emptiness checked. Sourced by scripts/lab.
#
# Host kinds (cg_detect):
#   hybrid  no systemd as PID 1, cgroup v1 + cgroup2 at /sys/fs/cgroup/unified
#           (this project's CI machine): folders $CG_NAME/bN in the named
#           systemd v1 hierarchy and in the cgroup2 one; power off = cgroup.kill.
#   unified no systemd as PID 1, cgroup2 only at /sys/fs/cgroup: one folder
#           $CG_NAME/bN; power off = cgroup.kill.
#   legacy  no systemd as PID 1, cgroup v1 only: a folder in the named systemd
#           hierarchy; power off = SIGKILL to every process listed, until empty.
#   systemd the host runs systemd: each board is a transient service
#           herdlab-bN.service in herdlab.slice with Delegate=yes (systemd-run);
#           its cgroup folder is used exactly as above.

cg_detect() {
  CG_V2="" CG_V1="" CG_SYSTEMD=0
  if [[ -f /sys/fs/cgroup/cgroup.controllers ]]; then
    CG_V2=/sys/fs/cgroup
  elif [[ -f /sys/fs/cgroup/unified/cgroup.controllers ]]; then
    CG_V2=/sys/fs/cgroup/unified
    CG_V1=/sys/fs/cgroup/systemd
  elif [[ -f /sys/fs/cgroup/systemd/cgroup.procs ]]; then
    CG_V1=/sys/fs/cgroup/systemd
  else
    die "no cgroup hierarchy is mounted at /sys/fs/cgroup (need cgroup2, or the v1 name=systemd hierarchy)"
  fi
  [[ -n $CG_V1 && ! -f $CG_V1/cgroup.procs ]] && CG_V1=""
  # sd_booted(): /run/systemd/system exists only when systemd is PID 1.
  [[ -d /run/systemd/system ]] && CG_SYSTEMD=1
  if ((CG_SYSTEMD)); then CG_KIND=systemd
  elif [[ -n $CG_V2 && -n $CG_V1 ]]; then CG_KIND=hybrid
  elif [[ -n $CG_V2 ]]; then CG_KIND=unified
  else CG_KIND=legacy
  fi
}

# cg_rel bN: the board's cgroup path below each hierarchy's root.
cg_rel() {
  if ((CG_SYSTEMD)); then echo "$CG_NAME.slice/$CG_NAME-$1.service"; else echo "$CG_NAME/$1"; fi
}

# cg_dirs bN: the board's cgroup folders (existing or not), one a line.
cg_dirs() {
  local rel; rel=$(cg_rel "$1")
  [[ -n $CG_V2 ]] && echo "$CG_V2/$rel"
  [[ -n $CG_V1 ]] && echo "$CG_V1/$rel"
  return 0
}

# cg_pids bN: every process in the board's cgroups (all sub-cgroups too).
cg_pids() {
  local d
  while read -r d; do
    [[ -d $d ]] && { find "$d" -name cgroup.procs -exec cat {} + 2>/dev/null || true; }
  done < <(cg_dirs "$1") | sort -un
}

# cg_populated bN: true while any process of the board is alive.
cg_populated() {
  local rel; rel=$(cg_rel "$1")
  if [[ -n $CG_V2 ]]; then
    [[ -f $CG_V2/$rel/cgroup.events ]] && grep -q '^populated 1' "$CG_V2/$rel/cgroup.events"
  else
    [[ -n $(cg_pids "$1") ]]
  fi
}

# cg_kill bN: SIGKILL every process of the board at once (power pulled).
cg_kill() {
  local rel; rel=$(cg_rel "$1")
  if [[ -n $CG_V2 && -f $CG_V2/$rel/cgroup.kill ]]; then
    echo 1 >"$CG_V2/$rel/cgroup.kill"
  else
    # No cgroup.kill (old kernel, or v1 only): SIGKILL whatever is listed;
    # cg_wait_empty repeats this until nothing is left.
    local p
    for p in $(cg_pids "$1"); do kill -9 "$p" 2>/dev/null || true; done
  fi
}

# cg_wait_empty bN SECONDS: wait until the board has no process left.
cg_wait_empty() {
  local b=$1 deadline=$(($(date +%s) + $2))
  while cg_populated "$b"; do
    (($(date +%s) < deadline)) || return 1
    # without cgroup.kill new children may have been forked meanwhile
    [[ -n $CG_V2 && -f $CG_V2/$(cg_rel "$b")/cgroup.kill ]] || cg_kill "$b"
    sleep 0.02
  done
}

# cg_remove bN: remove the board's (empty) cgroup folders, deepest first.
cg_remove() {
  local d
  if ((CG_SYSTEMD)); then
    systemctl reset-failed "$CG_NAME-$1.service" 2>/dev/null || true
  fi
  while read -r d; do
    [[ -d $d ]] && { find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true; }
  done < <(cg_dirs "$1")
  return 0
}

# cg_boards: boards that have a cgroup folder (found even without a board dir).
cg_boards() {
  local root d
  for root in $CG_V2 $CG_V1; do
    if ((CG_SYSTEMD)); then
      for d in "$root/$CG_NAME.slice/$CG_NAME"-b*.service; do
        [[ -d $d ]] && { d=${d##*/"$CG_NAME"-}; echo "${d%.service}"; }
      done
    else
      for d in "$root/$CG_NAME"/b*; do [[ -d $d ]] && basename "$d"; done
    fi
  done | grep -E '^b[1-9][0-9]*$' | sort -uV
}

# cg_remove_all: the lab's top cgroup folders (after every board is gone).
cg_remove_all() {
  local root
  if ((CG_SYSTEMD)); then
    systemctl stop "$CG_NAME.slice" 2>/dev/null || true
    return 0
  fi
  for root in $CG_V2 $CG_V1; do
    [[ -d $root/$CG_NAME ]] && { find "$root/$CG_NAME" -depth -type d -exec rmdir {} + 2>/dev/null || true; }
  done
  return 0
}

# cg_launch bN LOG CMD...: run CMD in the background inside the board's own
# cgroup, its output appended to LOG, detached from this shell (own session,
# stdin /dev/null, lock fd closed). Prints the PID where known.
cg_launch() {
  local b=$1 log=$2; shift 2
  if ((CG_SYSTEMD)); then
    systemctl reset-failed "$CG_NAME-$b.service" 2>/dev/null || true
    systemd-run --quiet --collect --unit="$CG_NAME-$b" --slice="$CG_NAME" \
      -p Delegate=yes -p StandardInput=null \
      -p StandardOutput="append:$log" -p StandardError="append:$log" \
      -- "$@" 9>&- || return 1
    systemctl show -p MainPID --value "$CG_NAME-$b.service"
    return 0
  fi
  local d
  while read -r d; do mkdir -p "$d"; done < <(cg_dirs "$b")
  (
    exec 9>&-
    while read -r d; do echo "$BASHPID" >"$d/cgroup.procs"; done < <(cg_dirs "$b")
    exec setsid "$@"
  ) </dev/null >>"$log" 2>&1 &
  echo $!
}
