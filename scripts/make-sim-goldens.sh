#!/usr/bin/env bash
# Records the reference simulator's outputs as the goldens of tests/sim_parity.rs:
#
#   scripts/make-sim-goldens.sh REF_DIR
#
# REF_DIR holds the reference rate_sim.py and its examples/. For every case in
# tests/fixtures/sim/cases.txt it runs `python3 REF_DIR/rate_sim.py ARGS` (and ARGS --json)
# inside tests/fixtures/sim and writes golden/NAME.md and golden/NAME.json (stdout, when
# not empty), golden/NAME.exit (the exit status, which must be the same in both modes)
# and golden/NAME.stderr (stderr when not empty, with REF_DIR's path replaced by REF_DIR).
# It copies the two example configs from REF_DIR/examples first and checks that the
# recorded reports equal the example reports shipped beside them. The tests never run
# this script: they read only tests/fixtures/sim/.
set -euo pipefail

if [ $# -ne 1 ] || [ ! -f "$1/rate_sim.py" ]; then
  echo "usage: $0 REF_DIR   (the directory holding rate_sim.py and examples/)" >&2
  exit 2
fi
ref=$(cd "$1" && pwd)
cd "$(dirname "$0")/../tests/fixtures/sim"

cp "$ref/examples/orders-api.json" "$ref/examples/orders-api-tuned.json" configs/
rm -rf golden
mkdir golden
err=$(mktemp)
trap 'rm -f "$err"' EXIT

trim() { sed -e 's/^[[:space:]]*//' -e 's/[[:space:]]*$//' <<<"$1"; }

while IFS='|' read -r name modes args _needles; do
  name=$(trim "$name")
  case "$name" in '' | '#'*) continue ;; esac
  read -r -a argv <<<"$(trim "$args")" || true
  for mode in $modes; do
    case "$mode" in
      md) flags=() ;;
      json) flags=(--json) ;;
      *) echo "$name: unknown mode $mode" >&2; exit 1 ;;
    esac
    out="golden/$name.$mode"
    set +e
    python3 "$ref/rate_sim.py" ${argv[@]+"${argv[@]}"} ${flags[@]+"${flags[@]}"} >"$out" 2>"$err"
    code=$?
    set -e
    [ -s "$out" ] || rm -f "$out"
    if [ -f "golden/$name.exit" ] && [ "$(cat "golden/$name.exit")" != "$code" ]; then
      echo "$name: exit status $code with $mode differs from $(cat "golden/$name.exit")" >&2
      exit 1
    fi
    echo "$code" >"golden/$name.exit"
    if [ -s "$err" ]; then
      sed "s#$ref#REF_DIR#g" "$err" >"golden/$name.stderr"
    fi
  done
  printf '%-28s exit %s\n' "$name" "$(cat "golden/$name.exit")"
done <cases.txt

cmp golden/orders-api.md "$ref/examples/orders-api-report.md"
cmp golden/orders-api-tuned.md "$ref/examples/orders-api-tuned-report.md"
echo "goldens written to tests/fixtures/sim/golden/"
