#!/usr/bin/env bash
# CTest's serve_openai_check: the official openai npm client against `day0 serve` on the bundled model
# (check.mjs prints one line per check, then "N passed, M failed"; exits 1 on any failure).
# Usage: run_checks.sh DAY0_BINARY   (needs node_modules: scripts/setup runs npm ci here)
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [ $# -ne 1 ]; then echo "usage: $0 DAY0_BINARY" >&2; exit 2; fi
bin="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
if [ ! -x "$bin" ]; then echo "run_checks: $1 is not an executable" >&2; exit 2; fi
if [ ! -d "$here/node_modules" ]; then echo "run_checks: $here/node_modules missing: run scripts/setup" >&2; exit 2; fi
cd "$here"
exec node check.mjs "$bin"
