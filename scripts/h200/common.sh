# Shared by the H200 scripts (sourced, not run): the carried release binaries,
# CUPTI on the loader path, a budgeted runner and the machine's description.
# The caller sets R (the results folder) and BUDGET (seconds), and uses bash's
# SECONDS as the budget's clock.

# DIR: unpacks every .devbin/*.gz and .devbin/*.xz into DIR (or takes
# $STEPTRACE, a local binary, for a dry run) and sets B to the steptrace binary.
# (A burn 0.22 binary with CUDA links LLVM: about 150 MB, carried as xz.)
st_binaries() {
  local dir=$1 packed name
  mkdir -p "$dir"
  if [ -n "${STEPTRACE:-}" ]; then
    B=$(readlink -f "$STEPTRACE")
    return 0
  fi
  for packed in .devbin/*.gz .devbin/*.xz; do
    [ -e "$packed" ] || continue
    name=$(basename "${packed%.*}")
    case $packed in
      # Several binaries in one archive (they share LLVM: one xz dictionary holds both).
      *.tar.xz) tar xJf "$packed" -C "$dir"; continue ;;
      *.gz) gzip -dc "$packed" > "$dir/$name" ;;
      *.xz) xz -dc "$packed" > "$dir/$name" ;;
    esac
    chmod +x "$dir/$name"
  done
  B=$dir/steptrace
}

# CUPTI must be on the loader path (steptrace dlopens libcupti.so*).
st_cupti_path() {
  local d extra=""
  for d in /usr/local/cuda*/targets/x86_64-linux/lib /usr/local/cuda*/extras/CUPTI/lib64; do
    if ls "$d"/libcupti.so* > /dev/null 2>&1; then extra="$extra:$d"; fi
  done
  export LD_LIBRARY_PATH="${extra#:}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
}

st_left() { echo $((BUDGET - SECONDS)); }

# NAME CAP_SECONDS COMMAND...: runs in $R with a timeout of the cap or what is
# left of the budget, whichever is less; its output goes to NAME.log, its exit
# status to rc.txt.
st_run_capped() {
  local name=$1 cap=$2 rc=0 t
  shift 2
  t=$(( cap < $(st_left) ? cap : $(st_left) ))
  if [ "$t" -lt 20 ]; then
    echo "SKIPPED $name: $(st_left)s of the budget left" | tee -a "$R/rc.txt"
    return 0
  fi
  echo "$(date -u +%T) [${SECONDS}s] start $name (timeout ${t}s): $*"
  (cd "$R" && timeout "$t" "$@") > "$R/$name.log" 2>&1 || rc=$?
  echo "$(date -u +%T) [${SECONDS}s] end $name rc=$rc"
  echo "$name rc=$rc wall_end=${SECONDS}s" >> "$R/rc.txt"
  tail -n 8 "$R/$name.log"
}

# The GPU, driver, CPU, binaries and CUPTI, into $R/machine.txt.
st_machine() {
  {
    echo "date: $(date -u +%FT%TZ)"
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv || echo "nvidia-smi rc=$?"
    uname -a; nproc
    echo "clocksource: $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>&1)" \
      "(available: $(cat /sys/devices/system/clocksource/clocksource0/available_clocksource 2>&1))"
    lscpu | grep -E 'Model name|^CPU\(s\)' || true
    sha256sum "$B" || true
    if [ -z "${STEPTRACE:-}" ]; then sha256sum "$(dirname "$B")"/* || true; fi
    ls -la /usr/local/cuda*/targets/x86_64-linux/lib/libcupti* 2>/dev/null || echo "no libcupti under /usr/local/cuda*/targets"
    echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
    "$B" --version || true
    "$B" backends || echo "steptrace backends rc=$?"
  } > "$R/machine.txt" 2>&1
  head -n 4 "$R/machine.txt"
}

# CLEAN: the start every H200 script shares: CLEAN (a folder) removed, $R/traces made,
# the carried binaries unpacked into $W/bin, CUPTI on the loader path, the machine
# described, and the budget's clock reset.
st_start() {
  rm -rf "$1"
  mkdir -p "$R/traces"
  st_binaries "$W/bin"
  st_cupti_path
  st_machine
  SECONDS=0
}

# NAME: packs $W/results into $FINAL/NAME.tgz (what comes back from the machine) and lists
# $FINAL; for an EXIT trap.
st_pack() {
  set +e
  tar czf "$FINAL/$1.tgz" -C "$W" results
  ls -la "$FINAL"
}

# NAME ARGS...: `steptrace train` on CUDA in the cache $CACHE, its traces in traces/NAME and
# its summary in NAME.json, capped at $CAP seconds (150 by default).
st_train() {
  local name=$1
  shift
  st_run_capped "$name" "${CAP:-150}" "$B" train --backend cuda --cache-dir "$CACHE" \
    --out "traces/$name" --json "$name.json" "$@"
}
