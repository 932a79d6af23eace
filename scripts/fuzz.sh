#!/usr/bin/env bash
# Runs every fuzz target for SECONDS_PER_TARGET seconds (default 120), one after another, one
# libFuzzer job each, and prints executions and findings per target. See docs/fuzzing.md.
#
# usage: scripts/fuzz.sh [SECONDS_PER_TARGET]
#
# Environment:
#   FUZZ_TARGETS        space-separated subset of targets (default: all six)
#   ASSERTWATCH_CORPUS  the shared corpus folder (default: ../shared/corpus beside the repository)
#   FUZZ_TOOLCHAIN      e.g. "+nightly" to use a nightly toolchain instead of RUSTC_BOOTSTRAP=1
#
# Needs cargo-fuzz (`cargo install cargo-fuzz`) and python3 (for seeding). cargo-fuzz passes
# unstable `-Z` flags to rustc (`-Zsanitizer=address`); a stable toolchain accepts them when
# RUSTC_BOOTSTRAP=1 is set, so no nightly toolchain is needed.

set -euo pipefail

secs="${1:-120}"
case "$secs" in
  '' | *[!0-9]*) echo "usage: $0 [SECONDS_PER_TARGET]" >&2; exit 2 ;;
esac

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
fuzz="$root/fuzz"
corpus_src="${ASSERTWATCH_CORPUS:-$root/../shared/corpus}"
read -r -a targets <<<"${FUZZ_TARGETS:-kmsg_record decode detect_line scan_stream config manifest}"
toolchain=()
if [ -n "${FUZZ_TOOLCHAIN:-}" ]; then
  toolchain=("$FUZZ_TOOLCHAIN")
fi

if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "cargo-fuzz is not installed: cargo install cargo-fuzz" >&2
  exit 2
fi
if [ "${#toolchain[@]}" -eq 0 ]; then
  export RUSTC_BOOTSTRAP=1
fi

# --- Seeding: corpus texts (and wrapped variants) into fuzz/corpus/<target>/ ----------------
seed() {
  python3 - "$corpus_src" "$fuzz/corpus" "$root" <<'PY'
import hashlib, json, os, sys, glob

src, out, root = sys.argv[1:4]

def put(target, data):
    if isinstance(data, str):
        data = data.encode()
    d = os.path.join(out, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, hashlib.sha1(data).hexdigest()), "wb") as f:
        f.write(data)

TS = "2024-05-01T12:00:00.123456789Z"

def cri(text):
    return "".join(f"{TS} stderr F {l}\n" for l in text.split("\n"))

def docker(text):
    return "".join(
        json.dumps({"log": l + "\n", "stream": "stderr", "time": TS}) + "\n"
        for l in text.split("\n"))

def kmsg(text):
    return "".join(f"6,{i},{i * 1000},-;{l}\n" for i, l in enumerate(text.split("\n")))

# Formats as the targets number them: auto, plain, cri, docker-json, kmsg.
AUTO, PLAIN, CRI, DOCKER, KMSG = range(5)
samples = []
for path in sorted(glob.glob(os.path.join(src, "*.jsonl"))):
    for line in open(path, encoding="utf-8"):
        if line.strip():
            s = json.loads(line)
            samples.append((s.get("stream", ""), s["text"]))
if not samples:
    print(f"no corpus under {src}; targets start from the built-in seeds only", file=sys.stderr)

for stream, text in samples:
    variants = [(PLAIN, text), (CRI, cri(text)), (DOCKER, docker(text))]
    if stream == "kernel-log":
        variants.append((KMSG, kmsg(text)))
        for l in text.split("\n"):
            put("kmsg_record", l)
            put("kmsg_record", f"4,17,{len(l)},-;{l}")
    for l in text.split("\n"):
        put("detect_line", l)
    for fmt, v in variants:
        for f in (AUTO, fmt):
            # decode: format byte, max line 1 + 4 * (b / 5): 201 and 13 bytes.
            put("decode", bytes([5 * 50 + f]) + v.encode())
            put("decode", bytes([5 * 3 + f]) + v.encode())
            # scan_stream: format, max line 1 + 2 * b (511, 41), bytes per read 1 + b (256, 7).
            put("scan_stream", bytes([f, 255, 255]) + v.encode())
            put("scan_stream", bytes([f, 20, 6]) + v.encode())

put("kmsg_record", " SUBSYSTEM=pci")
put("kmsg_record", " DEVICE=+pci:0000:3b:00.0")
put("kmsg_record", "6,1,2,-;bad\\xZZ and \\x41 and \\x")
put("detect_line", "Epoch 3:  45%|#####     | 450/1000 [01:23<01:42, loss=0.4211]")

configs = glob.glob(os.path.join(root, "config", "*.yaml"))
configs += glob.glob(os.path.join(root, "deploy", "**", "assertwatch.yaml"), recursive=True)
for c in sorted(configs):
    put("config", open(c, "rb").read())
put("config", 'listen: "127.0.0.1:9949"\nlogs: []\n')
put("config", "rules:\n  - name: r\n    pattern: 'MyLib fatal: (.*)'\n    kind: cuda_error\n")
manifests = glob.glob(os.path.join(root, "python", "tests", "fixtures", "*.json"))
manifests += glob.glob(os.path.join(root, "crates", "repro", "tests", "fixtures", "**", "*.json"), recursive=True)
for m in sorted(manifests):
    put("manifest", open(m, "rb").read())
for t in ("kmsg_record", "decode", "detect_line", "scan_stream", "config", "manifest"):
    n = len(os.listdir(os.path.join(out, t)))
    print(f"seeded {t}: {n} inputs")
PY
}

seed

cd "$fuzz"
echo "building targets (${FUZZ_TOOLCHAIN:-RUSTC_BOOTSTRAP=1 with the default toolchain})"
cargo ${toolchain[@]+"${toolchain[@]}"} fuzz build -O

logs="$fuzz/artifacts/logs"
mkdir -p "$logs"
summary=()
for t in "${targets[@]}"; do
  case "$t" in
    config) extra=(-dict="$fuzz/dict/config.dict" -max_len=4096) ;;
    kmsg_record | detect_line) extra=(-dict="$fuzz/dict/logs.dict" -max_len=4096) ;;
    *) extra=(-dict="$fuzz/dict/logs.dict" -max_len=16384) ;;
  esac
  mkdir -p "artifacts/$t"
  marker="$(mktemp)"
  log="$logs/$t.log"
  echo "== $t: ${secs}s"
  set +e
  cargo ${toolchain[@]+"${toolchain[@]}"} fuzz run -O "$t" -- \
    -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    "${extra[@]}" >"$log" 2>&1
  rc=$?
  set -e
  execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)"
  [ -n "$execs" ] || execs="$(sed -n 's/^Done \([0-9]*\) runs.*/\1/p' "$log" | tail -n 1)"
  cov="$(grep -o 'cov: [0-9]*' "$log" | tail -n 1 | cut -d' ' -f2)"
  found="$(find "artifacts/$t" -type f -newer "$marker" | sort)"
  rm -f "$marker"
  nfound="$(printf '%s' "$found" | grep -c . || true)"
  summary+=("$(printf '%-12s execs %-10s coverage %-6s findings %s (exit %s)' \
    "$t" "${execs:-?}" "${cov:-?}" "$nfound" "$rc")")
  if [ "$nfound" -gt 0 ]; then
    grep -m 3 -E 'panicked at|ERROR: (libFuzzer|AddressSanitizer)' "$log" || true
    printf '%s\n' "$found" | sed 's/^/  /'
    echo "  reproduce: (cd fuzz && cargo fuzz run $t <artifact>); full log: $log"
  fi
done

echo
echo "summary (${secs}s per target, one job):"
printf '  %s\n' "${summary[@]}"
