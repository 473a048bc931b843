#!/usr/bin/env bash
# Criterion benchmarks of the core (benches/ in the root crate).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
cargo bench -p sluicegate "$@"
