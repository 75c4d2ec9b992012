#!/usr/bin/env bash
# Runs every npm reference check against a day0 binary: check_encode.mjs for the four tokenizers (encode, decode,
# streaming decode) and check_chat.mjs for the three chat templates, on a corpus generated once. Prints each
# check's output, then one line "N passed, M failed" summing them all; exits 1 on any failure.
# Usage: run_checks.sh DAY0_BINARY   (needs node_modules: scripts/setup runs npm ci here)
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [ $# -ne 1 ]; then echo "usage: $0 DAY0_BINARY" >&2; exit 2; fi
bin="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
if [ ! -x "$bin" ]; then echo "run_checks: $1 is not an executable" >&2; exit 2; fi
if [ ! -d "$here/node_modules" ]; then echo "run_checks: $here/node_modules missing: run scripts/setup" >&2; exit 2; fi
cd "$here"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
node corpus.mjs --stats > "$work/corpus.jsonl" || { echo "run_checks: corpus generation failed"; echo "0 passed, 1 failed"; exit 1; }
export CORPUS="$work/corpus.jsonl"

passed=0; failed=0
run() {  # run SCRIPT NAME: adds the script's "<phase> NAME: N passed, M failed" lines to the totals
  local log="$work/$1.$2.log" rc
  echo "== node $1 $2"
  node "$1" "$2" "$bin" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  local lines
  lines="$(grep -E "^[a-z-]+ $2: [0-9]+ passed, [0-9]+ failed$" "$log")"
  if [ -z "$lines" ] || { [ "$rc" -ne 0 ] && [ "$rc" -ne 1 ]; }; then
    echo "run_checks: node $1 $2 exited $rc without a complete summary"; failed=$((failed + 1))
  fi
  while read -r _ _ p _ f _; do
    [ -n "${p:-}" ] && passed=$((passed + p)) && failed=$((failed + f))
  done <<< "$lines"
  if [ "$rc" -eq 1 ] && ! grep -qE " [1-9][0-9]* failed$" <<< "$lines"; then failed=$((failed + 1)); fi
}
for t in gptoss qwen3 deepseek_v3 llama3; do run check_encode.mjs "$t"; done
for t in qwen3 deepseek_v3 llama3; do run check_chat.mjs "$t"; done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
