#!/usr/bin/env bash
# Runs every test of the project:
#   1. the Rust workspace: unit tests, integration tests against the real binary (with real
#      Prometheus, Alertmanager, promtool and the Python replay harness), property tests;
#   2. the Python replay package (recorder, harness, example job);
#   3. the deployment checks (rules and their unit tests, dashboards, Kubernetes, Helm, systemd);
#   4. the soak test in its short mode.
# `.ci/run` installs the tools first; on a workstation, missing tools skip unless CI=true.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --workspace --locked
python3 -m pytest python/tests -q
cargo build --locked
scripts/check-deploy.sh
if [ -x scripts/soak.sh ]; then
  scripts/soak.sh --short
fi
