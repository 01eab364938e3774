#!/usr/bin/env bash
# `npm test`: typecheck and lint at once, then the Jest projects in two lanes at once:
# the unit and workflow tests (each workflow test file starts its own Temporal dev
# server on free ports) beside the integration tests (one shared dev server and
# database, so one file at a time). The first lane's output is printed when it ends.
set -uo pipefail
cd "$(dirname "$0")/.."

npx tsc --noEmit & typecheck=$!
npx eslint . & lint=$!
wait "$typecheck" || { echo "npm test: typecheck failed" >&2; wait "$lint"; exit 1; }
wait "$lint" || { echo "npm test: lint failed" >&2; exit 1; }

fast_log=$(mktemp)
trap 'rm -f "$fast_log"' EXIT
npx jest --selectProjects unit workflow >"$fast_log" 2>&1 & fast=$!
npx jest --selectProjects integration --runInBand & integration=$!
wait "$fast"; fast_status=$?
echo "== unit and workflow tests (exit $fast_status)"
cat "$fast_log"
wait "$integration"; integration_status=$?
echo "== integration tests (exit $integration_status); unit and workflow tests (exit $fast_status)"
[ "$fast_status" -eq 0 ] && [ "$integration_status" -eq 0 ]
