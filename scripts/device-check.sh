#!/usr/bin/env bash
# GPU device check: run on a machine with an NVIDIA GPU and its driver (nothing else needed,
# network to crates.io optional). It builds assertwatch, runs the CUDA probe, runs the daemon with
# the NVML backend for 30 s, saves /metrics, compares every value it can with nvidia-smi, and
# times one full NVML poll against one `nvidia-smi --query-gpu` call.
#
#   scripts/device-check.sh            # results under ./device-check-out (or $OUT)
#
# Every step has a timeout and the whole run stays under 5 minutes. The exit status is 0 when every
# comparison matched and the probe passed, 1 otherwise, 3 when there is no NVIDIA driver at all.
set -uo pipefail

cd "$(dirname "$0")/.."
OUT="${OUT:-./device-check-out}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
START=$(date +%s)
BUDGET=290 # seconds for the whole run
PORT=19949
STATUS=0

log() { printf '[%3ds] %s\n' "$(($(date +%s) - START))" "$*" | tee -a "$OUT/summary.txt"; }
left() { echo $((BUDGET - ($(date +%s) - START))); }
# step_timeout WANTED: the smaller of WANTED and what is left of the budget (at least 1).
step_timeout() {
  local l
  l=$(left)
  if [ "$l" -lt "$1" ]; then echo $((l > 1 ? l : 1)); else echo "$1"; fi
}

: >"$OUT/summary.txt"
log "device check; output in $OUT"

# 1. The driver.
if ! command -v nvidia-smi >/dev/null 2>&1; then
  log "nvidia-smi not found: no NVIDIA driver here; nothing to check"
  exit 3
fi
timeout 20 nvidia-smi -L >"$OUT/nvidia-smi-L.txt" 2>&1
log "GPUs: $(grep -c '^GPU ' "$OUT/nvidia-smi-L.txt" || true) ($(head -n1 "$OUT/nvidia-smi-L.txt"))"

# 2. A toolchain, only if cargo is missing.
if ! command -v cargo >/dev/null 2>&1 && [ -x "$HOME/.cargo/bin/cargo" ]; then
  export PATH="$HOME/.cargo/bin:$PATH"
fi
if ! command -v cargo >/dev/null 2>&1; then
  if command -v curl >/dev/null 2>&1; then
    log "cargo missing; trying rustup (minimal profile)"
    if timeout "$(step_timeout 120)" sh -c 'curl -sSf --max-time 60 https://sh.rustup.rs | sh -s -- -y --profile minimal' \
      >"$OUT/rustup.log" 2>&1; then
      export PATH="$HOME/.cargo/bin:$PATH"
    else
      log "rustup could not be installed (no network?); using prebuilt binaries if present"
    fi
  else
    log "cargo and curl missing; using prebuilt binaries if present"
  fi
fi

# 3. Build: the small NVML check first (it needs only the GPU crate), then the daemon.
# ASSERTWATCH_BIN / NVML_CHECK_BIN point at prebuilt binaries; SKIP_BUILD=1 skips cargo.
BIN="${ASSERTWATCH_BIN:-target/release/assertwatch}"
CHECK="${NVML_CHECK_BIN:-target/release/examples/nvml_check}"
if [ "${SKIP_BUILD:-0}" != 1 ] && command -v cargo >/dev/null 2>&1; then
  log "building the NVML check"
  timeout "$(step_timeout 150)" cargo build --release -p assertwatch-gpu --example nvml_check \
    >"$OUT/build-nvml-check.log" 2>&1 || log "NVML check build failed (see build-nvml-check.log)"
  log "building the daemon"
  timeout "$(step_timeout 200)" cargo build --release >"$OUT/build.log" 2>&1 ||
    log "daemon build failed or timed out (see build.log)"
fi
[ -x "$BIN" ] || log "no $BIN; daemon steps skipped"
[ -x "$CHECK" ] || log "no $CHECK; poll timing and fallback metrics skipped"

# 4. The CUDA probe through the daemon's CLI (exit 3 = no CUDA driver).
if [ -x "$BIN" ]; then
  timeout "$(step_timeout 90)" "$BIN" probe >"$OUT/probe.txt" 2>&1
  rc=$?
  case $rc in
    0) log "probe: passed" ;;
    3) log "probe: no CUDA driver (exit 3)"; STATUS=1 ;;
    124) log "probe: timed out"; STATUS=1 ;;
    *) log "probe: failed with exit $rc (see probe.txt)"; STATUS=1 ;;
  esac
fi

# 5. One full NVML poll, timed, plus the probe of every GPU from the library itself.
if [ -x "$CHECK" ]; then
  timeout "$(step_timeout 120)" "$CHECK" --iterations 20 --probe --metrics "$OUT/metrics-nvml-check.txt" \
    >"$OUT/nvml-check.txt" 2>&1
  rc=$?
  log "nvml_check (exit $rc): $(grep '^nvml poll' "$OUT/nvml-check.txt" || echo 'no timing')"
  grep '^probe gpu' "$OUT/nvml-check.txt" | while read -r line; do log "  $line"; done
  [ "$rc" -eq 0 ] || STATUS=1
fi

# 6. The daemon with the NVML backend for 30 s, then its /metrics.
http_get() { # URL FILE
  if command -v curl >/dev/null 2>&1; then
    curl -sS --max-time 5 "$1" -o "$2"
  elif command -v wget >/dev/null 2>&1; then
    wget -q -T 5 -O "$2" "$1"
  else
    local path="/${1#http://*/}"
    exec 3<>"/dev/tcp/127.0.0.1/$PORT" || return 1
    printf 'GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' "$path" >&3
    timeout 5 cat <&3 | sed '1,/^\r\{0,1\}$/d' >"$2"
    exec 3>&-
  fi
}
METRICS="$OUT/metrics.txt"
if [ -x "$BIN" ]; then
  TMP=$(mktemp -d)
  cat >"$TMP/config.yaml" <<EOF
listen: "127.0.0.1:$PORT"
state_dir: $TMP/state
logs: []
gpu:
  backend: nvml
  poll_interval: 2s
EOF
  cp "$TMP/config.yaml" "$OUT/daemon-config.yaml"
  RUN_FOR=$(step_timeout 30)
  "$BIN" run --config "$TMP/config.yaml" >"$OUT/daemon.log" 2>&1 &
  PID=$!
  sleep "$RUN_FOR"
  http_get "http://127.0.0.1:$PORT/metrics" "$METRICS" || log "could not fetch /metrics"
  kill "$PID" 2>/dev/null
  for _ in 1 2 3 4 5; do kill -0 "$PID" 2>/dev/null || break; sleep 1; done
  kill -9 "$PID" 2>/dev/null
  wait "$PID" 2>/dev/null
  rm -rf "$TMP"
  log "daemon ran ${RUN_FOR}s; /metrics: $(grep -c '^assertwatch_' "$METRICS" 2>/dev/null || echo 0) series"
fi
if ! grep -q '^assertwatch_gpu_info' "$METRICS" 2>/dev/null; then
  if [ -s "$OUT/metrics-nvml-check.txt" ]; then
    log "no GPU series from the daemon; comparing the library's own rendering (metrics-nvml-check.txt)"
    METRICS="$OUT/metrics-nvml-check.txt"
  else
    log "no metrics to compare"
    exit 1
  fi
fi
if command -v promtool >/dev/null 2>&1; then
  if promtool check metrics <"$METRICS" >"$OUT/promtool.txt" 2>&1; then
    log "promtool check metrics: no findings"
  else
    log "promtool check metrics: findings (see promtool.txt)"; STATUS=1
  fi
fi

# 7. nvidia-smi, timed, and the comparison.
FIELDS="index,uuid,pci.bus_id,name,driver_version,vbios_version,utilization.gpu,utilization.memory,memory.used,memory.total,memory.free,temperature.gpu,temperature.memory,power.draw,power.limit,clocks.sm,clocks.mem,pstate,pcie.link.gen.current,pcie.link.width.current,ecc.errors.corrected.volatile.total,ecc.errors.uncorrected.volatile.total"
t0=$(date +%s%N)
timeout 30 nvidia-smi --query-gpu="$FIELDS" --format=csv,noheader,nounits >"$OUT/nvidia-smi.csv" 2>"$OUT/nvidia-smi.err"
rc=$?
t1=$(date +%s%N)
if [ $rc -ne 0 ]; then
  # Older nvidia-smi without temperature.memory: query without it and mark it N/A.
  FIELDS2="${FIELDS/,temperature.memory/}"
  t0=$(date +%s%N)
  timeout 30 nvidia-smi --query-gpu="$FIELDS2" --format=csv,noheader,nounits 2>>"$OUT/nvidia-smi.err" |
    awk -F', ' -v OFS=', ' '{ $12 = $12 OFS "[N/A]"; print }' >"$OUT/nvidia-smi.csv"
  t1=$(date +%s%N)
fi
log "one nvidia-smi --query-gpu call: $(((t1 - t0) / 1000000)) ms"
grep '^nvml poll' "$OUT/nvml-check.txt" 2>/dev/null | while read -r line; do log "one full assertwatch $line"; done

awk -F', ' -v metrics="$METRICS" '
function labelval(s, key,   m) {
  if (match(s, key "=\"[^\"]*\"")) { m = substr(s, RSTART + length(key) + 2, RLENGTH - length(key) - 3); return m }
  return ""
}
function num(v) { return (v ~ /^-?[0-9.]+(e[+-]?[0-9]+)?$/) ? v + 0 : "" }
function na(v) { return v == "" || v ~ /N\/A|Not Supported|Unknown/ }
function abs(x) { return x < 0 ? -x : x }
# row(metric, gpu, ours, smi, tol, kind): kind "num" (within tol) or "str" (equal)
function row(metric, gpu, ours, smi, tol,   ok) {
  if (na(smi) && ours == "") ok = "both absent"
  else if (na(smi)) ok = "n/a in nvidia-smi"
  else if (ours == "") { ok = "MISSING"; bad++ }
  else if (tol == "str") { ok = (ours == smi) ? "yes" : "NO"; if (ok == "NO") bad++ }
  else { ok = (abs(ours - smi) <= tol) ? "yes" : "NO"; if (ok == "NO") bad++ }
  printf "%-34s %-3s %-24s %-24s %s\n", metric, gpu, (ours == "" ? "-" : ours), smi, ok
}
BEGIN {
  while ((getline line < metrics) > 0) {
    if (line ~ /^#/ || line !~ /^assertwatch_gpu_/) continue
    n = split(line, parts, " "); value = parts[n]
    name = line; sub(/[{ ].*/, "", name)
    labels = line; sub(/^[^{]*\{/, "", labels); sub(/\}[^}]*$/, "", labels)
    g = labelval(labels, "gpu")
    extra = labelval(labels, "sensor") labelval(labels, "clock") labelval(labels, "type") labelval(labels, "counter")
    val[name "|" g "|" extra] = value
    if (name == "assertwatch_gpu_info") {
      info_name[g] = labelval(labels, "name"); info_drv[g] = labelval(labels, "driver_version")
      info_vbios[g] = labelval(labels, "vbios_version"); info_uuid[g] = labelval(labels, "uuid")
      info_pci[g] = labelval(labels, "pci_bus_id")
    }
  }
  printf "%-34s %-3s %-24s %-24s %s\n", "metric", "gpu", "ours", "nvidia-smi", "match"
}
{
  g = $1
  mib = 1048576
  total = num($10)
  row("uuid", g, info_uuid[g], $2, "str")
  row("pci_bus_id", g, info_pci[g], $3, "str")
  row("name", g, info_name[g], $4, "str")
  row("driver_version", g, info_drv[g], $5, "str")
  row("vbios_version", g, info_vbios[g], $6, "str")
  v = val["assertwatch_gpu_utilization_ratio|" g "|"]; row("utilization (%) ±20", g, v == "" ? "" : v * 100, num($7), 20)
  v = val["assertwatch_gpu_memory_utilization_ratio|" g "|"]; row("memory utilization (%) ±20", g, v == "" ? "" : v * 100, num($8), 20)
  tolmem = (total == "" ? 1024 : total * 0.02 + 64)
  v = val["assertwatch_gpu_memory_used_bytes|" g "|"]; row("memory used (MiB)", g, v == "" ? "" : int(v / mib), num($9), tolmem)
  v = val["assertwatch_gpu_memory_total_bytes|" g "|"]; row("memory total (MiB)", g, v == "" ? "" : int(v / mib), num($10), 1)
  v = val["assertwatch_gpu_memory_free_bytes|" g "|"]; row("memory free (MiB)", g, v == "" ? "" : int(v / mib), num($11), tolmem)
  row("temperature gpu (C) ±3", g, val["assertwatch_gpu_temperature_celsius|" g "|gpu"], num($12), 3)
  row("temperature memory (C) ±3", g, val["assertwatch_gpu_temperature_celsius|" g "|memory"], num($13), 3)
  p = num($14); row("power draw (W) ±15%", g, val["assertwatch_gpu_power_watts|" g "|"], p, (p == "" ? 0 : p * 0.15 + 25))
  row("power limit (W) ±1", g, val["assertwatch_gpu_power_limit_watts|" g "|"], num($15), 1)
  v = val["assertwatch_gpu_clock_hertz|" g "|sm"]; c = num($16); row("clock sm (MHz) ±15%", g, v == "" ? "" : v / 1e6, c, (c == "" ? 0 : c * 0.15 + 30))
  v = val["assertwatch_gpu_clock_hertz|" g "|memory"]; c = num($17); row("clock memory (MHz) ±2%", g, v == "" ? "" : v / 1e6, c, (c == "" ? 0 : c * 0.02 + 1))
  ps = $18; sub(/^P/, "", ps); row("pstate", g, val["assertwatch_gpu_pstate|" g "|"], num(ps), 0)
  row("pcie link generation", g, val["assertwatch_gpu_pcie_link_generation|" g "|"], num($19), 0)
  row("pcie link width", g, val["assertwatch_gpu_pcie_link_width|" g "|"], num($20), 0)
  row("ecc corrected volatile", g, val["assertwatch_gpu_ecc_errors_total|" g "|correctedvolatile"], num($21), 0)
  row("ecc uncorrected volatile", g, val["assertwatch_gpu_ecc_errors_total|" g "|uncorrectedvolatile"], num($22), 0)
}
END { printf "\n%d mismatch(es)\n", bad; exit (bad > 0) }
' "$OUT/nvidia-smi.csv" >"$OUT/compare.txt" 2>&1
rc=$?
cat "$OUT/compare.txt"
[ $rc -eq 0 ] || STATUS=1

log "done in $(($(date +%s) - START))s; exit $STATUS"
exit $STATUS
