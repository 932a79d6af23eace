#!/usr/bin/env bash
# Device check for the replay harness: real device-side asserts on a GPU, replayed synchronously.
#
# Needs only an NVIDIA driver, python3 (>= 3.9) with venv, and PyPI. For each planted bug of
# python/examples/tiny_train.py it
#   1. runs the job on CUDA, which fires a real device-side assert (the job's traceback names a
#      later, asynchronous line),
#   2. replays the recorded step with `python -m assertwatch_replay run --mode sync-gpu`
#      (and `--mode cpu` for comparison),
#   3. prints a table: the line the job's traceback named, the line the replay named, the planted
#      line, and the kernel assertion captured from the replay's fd 2.
# One compute-sanitizer replay of the label bug runs when the tool is present and time allows.
#
# Output: $OUT (default ./device-check-out): device-check.log, summary.txt, summary.json, and per
# bug the job's log/stderr and the replays' result.json, stderr.log, stdout.log, worker.json.
# The virtual environment goes to $VENV (default /tmp/assertwatch-device-venv), not under $OUT.
# Exit status: 0 when every sync-gpu replay named the planted line, 1 otherwise, 2 when the
# environment could not be set up.
# SMOKE_CPU=1 runs the same plumbing without a GPU (job and replays on CPU) to test this script.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${OUT:-./device-check-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
VENV=${VENV:-/tmp/assertwatch-device-venv}
PYTHON=${PYTHON:-python3}
BUDGET_S=${BUDGET_S:-280}          # stop starting optional work after this many seconds
SMOKE_CPU=${SMOKE_CPU:-0}
TORCH_SPEC=${TORCH_SPEC:-torch}    # e.g. "torch==2.8.0" where the driver is too old for the newest wheel
read -r -a TORCH_ARGS <<<"$TORCH_SPEC"
if [ "$SMOKE_CPU" = 1 ]; then JOB_DEVICE=cpu; MODES=(cpu); else JOB_DEVICE=cuda; MODES=(sync-gpu cpu); fi
exec > >(tee "$OUT/device-check.log") 2>&1

log() { printf '[%4ds] %s\n' "$SECONDS" "$*"; }
left() { echo $((BUDGET_S - SECONDS)); }

log "device check starting; output in $OUT"
timeout 20 nvidia-smi --query-gpu=index,name,uuid,driver_version --format=csv \
  || log "nvidia-smi not available (continuing: torch decides)"

# --- 1. environment ----------------------------------------------------------------------------
if [ ! -x "$VENV/bin/python" ]; then
  if timeout 60 "$PYTHON" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    log "system python already has CUDA torch; reusing it through --system-site-packages"
    timeout 60 "$PYTHON" -m venv --system-site-packages "$VENV"
  else
    timeout 60 "$PYTHON" -m venv "$VENV"
  fi
fi
VPY="$VENV/bin/python"
if ! timeout 60 "$VPY" -c 'import torch' 2>/dev/null; then
  log "installing ${TORCH_SPEC} and numpy from PyPI"
  if ! timeout 200 "$VPY" -m pip install --disable-pip-version-check -q "${TORCH_ARGS[@]}" numpy; then
    log "installing torch failed or took over 200 s; rerun to reuse the partly filled pip cache"
    exit 2
  fi
fi
if ! timeout 120 "$VPY" -m pip install --disable-pip-version-check -q "$ROOT/python"; then
  log "installing the assertwatch-replay package failed"
  exit 2
fi
SMOKE_CPU="$SMOKE_CPU" timeout 60 "$VPY" - <<'EOF'
import os, torch
print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())
if os.environ.get("SMOKE_CPU") == "1":
    raise SystemExit(0)
if not torch.cuda.is_available():
    raise SystemExit("torch sees no CUDA device: nothing to check")
print("device", torch.cuda.get_device_name(0))
EOF

# --- 2. jobs and replays -----------------------------------------------------------------------
BUGS=(label token index bce)
for bug in "${BUGS[@]}"; do
  if [ "$(left)" -lt 40 ]; then log "time budget spent; skipping bug $bug"; continue; fi
  dir="$OUT/$bug"
  rm -rf "$dir"
  mkdir -p "$dir"
  log "bug $bug: running the job on $JOB_DEVICE"
  set +e
  (cd "$ROOT/python" && timeout 90 "$VPY" examples/tiny_train.py --device "$JOB_DEVICE" --bug "$bug" --bad-step 5 \
      --steps 8 --state-dir "$dir/state" --log-file "$dir/train.log") >"$dir/job.stdout" 2>"$dir/job.stderr"
  echo $? >"$dir/job.rc"
  set -e
  latest="$dir/state/tiny-train/rank-00000/latest.json"
  if [ ! -f "$latest" ]; then log "bug $bug: no recorded state"; continue; fi
  manifest=$("$VPY" -c 'import json,sys,os; d=os.path.dirname(sys.argv[1]); print(os.path.join(d, json.load(open(sys.argv[1]))["step_dir"], "manifest.json"))' "$latest")
  for mode in "${MODES[@]}"; do
    if [ "$(left)" -lt 20 ]; then log "time budget spent; skipping $mode for $bug"; continue; fi
    log "bug $bug: replay $mode"
    timeout 100 "$VPY" -m assertwatch_replay run --manifest "$manifest" --mode "$mode" \
      --result "$dir/replay-$mode/result.json" --out-dir "$dir/replay-$mode" --timeout 90 --grace 2 \
      || log "bug $bug: supervisor exit status $? in $mode"
  done
done

if [ "$SMOKE_CPU" = 1 ]; then
  log "smoke run on CPU: sanitizer mode not checked"
elif command -v compute-sanitizer >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/compute-sanitizer ]; then
  dir="$OUT/label"
  if [ "$(left)" -gt 60 ] && [ -f "$dir/state/tiny-train/rank-00000/latest.json" ]; then
    manifest=$(ls "$dir"/state/tiny-train/rank-00000/ring/*/manifest.json | tail -n 1)
    log "label: replay under compute-sanitizer"
    timeout $(( $(left) - 10 )) "$VPY" -m assertwatch_replay run --manifest "$manifest" --mode sanitizer \
      --result "$dir/replay-sanitizer/result.json" --out-dir "$dir/replay-sanitizer" \
      --timeout $(( $(left) - 20 )) --grace 2 || log "sanitizer replay: supervisor exit status $?"
  fi
else
  log "compute-sanitizer not found; sanitizer mode not checked"
fi

# --- 3. table ------------------------------------------------------------------------------------
set +e
SMOKE_CPU="$SMOKE_CPU" timeout 30 "$VPY" - "$ROOT/python/examples/tiny_train.py" "$OUT" "${BUGS[@]}" <<'EOF'
import json, os, re, sys
smoke = os.environ.get("SMOKE_CPU") == "1"

example, out, bugs = sys.argv[1], sys.argv[2], sys.argv[3:]
src = open(example).read().splitlines()
planted = {b: next(i for i, l in enumerate(src, 1) if l.rstrip().endswith(f"# PLANTED-BUG: {b}")) for b in bugs}
frame_re = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')

def job_line(d):
    """Deepest frame of the example in the job's own traceback (its log, else its stderr)."""
    for name in ("train.log", "job.stderr"):
        try:
            text = open(os.path.join(d, name), errors="replace").read()
        except OSError:
            continue
        frames = [(f, int(n)) for f, n, _ in frame_re.findall(text) if f.endswith("tiny_train.py")]
        if frames:
            return frames[-1][1]
    return None

def load(path):
    try:
        return json.load(open(path))
    except (OSError, ValueError):
        return None

rows, ok = [], True
for bug in bugs:
    d = os.path.join(out, bug)
    sync = load(os.path.join(d, "replay-sync-gpu", "result.json")) or {}
    cpu = load(os.path.join(d, "replay-cpu", "result.json")) or {}
    frame = sync.get("failing_frame") or {}
    ka = (sync.get("kernel_assertions") or [{}])[0]
    exc = sync.get("exception") or {}
    row = {
        "bug": bug,
        "planted_line": planted[bug],
        "job_traceback_line": job_line(d),
        "sync_gpu_outcome": sync.get("outcome"),
        "sync_gpu_line": frame.get("line"),
        "sync_gpu_exception": f"{exc.get('type')} (code {exc.get('cuda_error_code')})" if exc else None,
        "kernel_assertion": f"{os.path.basename(ka['file'])}:{ka['line']} `{ka['assertion']}` x{ka['threads']}" if ka else None,
        "dsa_effective": (sync.get("dsa") or {}).get("effective"),
        "sync_gpu_duration_s": sync.get("duration_s"),
        "sync_gpu_phases_s": sync.get("phases_s"),
        "cpu_outcome": cpu.get("outcome"),
        "cpu_line": (cpu.get("failing_frame") or {}).get("line"),
        "cpu_message": (cpu.get("exception") or {}).get("message"),
        "cpu_duration_s": cpu.get("duration_s"),
    }
    if smoke:
        row["pass"] = row["cpu_outcome"] == "reproduced_cpu_only" and row["cpu_line"] == planted[bug]
    else:
        row["pass"] = row["sync_gpu_outcome"] == "reproduced" and row["sync_gpu_line"] == planted[bug]
    ok = ok and row["pass"]
    rows.append(row)

san = load(os.path.join(out, "label", "replay-sanitizer", "result.json"))
lines = [
    f"{'bug':6} {'planted':>7} {'job tb':>7} {'sync-gpu':>8} {'cpu':>5}  {'outcome':11} {'s':>5}  kernel assertion",
]
for r in rows:
    lines.append(
        f"{r['bug']:6} {r['planted_line']:>7} {str(r['job_traceback_line']):>7} {str(r['sync_gpu_line']):>8} "
        f"{str(r['cpu_line']):>5}  {str(r['sync_gpu_outcome']):11} {str(r['sync_gpu_duration_s']):>5}  "
        f"{r['kernel_assertion']}  {'PASS' if r['pass'] else 'FAIL'}"
    )
for r in rows:
    lines.append(f"{r['bug']}: sync-gpu {r['sync_gpu_exception']}, dsa effective {r['dsa_effective']}; "
                 f"cpu {r['cpu_outcome']}: {r['cpu_message']}")
if san:
    s = san.get("sanitizer") or {}
    lines.append(f"sanitizer (label): outcome {san.get('outcome')}, line {(san.get('failing_frame') or {}).get('line')}, "
                 f"errors {s.get('error_summary')}, first finding {(s.get('findings') or [None])[0]}, {san.get('duration_s')} s")
text = "\n".join(lines)
print(text)
open(os.path.join(out, "summary.txt"), "w").write(text + "\n")
json.dump({"rows": rows, "sanitizer": san, "all_pass": ok}, open(os.path.join(out, "summary.json"), "w"), indent=2)
sys.exit(0 if ok else 1)
EOF
status=$?
log "device check finished, status $status"
exit $status
