#!/usr/bin/env bash
# Soak test of the real daemon: a million log lines with a thousand known asserts, rotations,
# kill -9 restarts, a full state disk, malformed input, a 100 MB line, binary files and an assert
# flood; fails if one assert is lost or stored twice or the daemon's peak RSS reaches the goal.
# See docs/soak.md.
#
# usage: scripts/soak.sh [--short] [--seed N] [--out DIR] [--keep] [--max-rss-mib 50]
#
# Builds target/release/assertwatch first (cargo rebuilds only when something changed).
# Environment:
#   ASSERTWATCH_BIN   test this binary instead, without building
#   SOAK_NO_BUILD=1   use target/release/assertwatch as it is
#   CI=true           not being root (no tmpfs for the disk-full fault) is an error, not a skip
set -euo pipefail
cd "$(dirname "$0")/.."

bin="${ASSERTWATCH_BIN:-}"
if [ -z "$bin" ]; then
  bin=target/release/assertwatch
  if [ "${SOAK_NO_BUILD:-}" != 1 ]; then
    if command -v cargo >/dev/null 2>&1; then
      cargo build --release --locked --bin assertwatch
    elif [ ! -x "$bin" ]; then
      echo "soak: cargo is not installed and $bin does not exist" >&2
      exit 2
    fi
  fi
fi
exec python3 scripts/soak.py --binary "$bin" "$@"
