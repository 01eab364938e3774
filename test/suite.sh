#!/usr/bin/env bash
# `npm test` (the whole suite, what CI runs) and `npm run test:fast` (the inner
# loop: typecheck, lint, unit and workflow tests; no PostgreSQL, no engines).
# Typecheck and lint run beside the tests. For the whole suite, three test lanes at once:
# the unit and workflow tests (each workflow test file starts its own Temporal dev
# server on free ports), and the integration tests, one file at a time, in one lane
# or (HARNESS_S_TEST_SHARDS=n) in n shards balanced by the files' measured durations
# (test/sequencer.js), each shard with a Temporal dev server and a database of its
# own. Two shards are the default: on 2 cores one lane took 40 minutes, two shards 21 to
# 33; three shards were slower still (the suite is bound by the CPU there, and tests hit
# their timeouts). HARNESS_S_TEST_SHARDS=1 runs them in one lane. The first shard prints as it goes; the other lanes' output is
# printed when they end.
set -uo pipefail
cd "$(dirname "$0")/.."
mode=${1:-all}
case "$mode" in all|fast) ;; *) echo "usage: test/suite.sh [all|fast]" >&2; exit 2 ;; esac

# Typecheck and lint run beside the integration shards (their logs are printed at the end), and before the unit
# tests: test/unit/layer-order.test.ts plants files that lint must not see.
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
npx tsc --noEmit >"$logs/typecheck" 2>&1 & typecheck=$!
npm run --silent lint >"$logs/lint" 2>&1 & lint=$!
checks_status=
checks() {
  if [ -z "$checks_status" ]; then
    checks_status=0
    wait "$typecheck" || { echo "== typecheck failed" >&2; checks_status=1; }
    cat "$logs/typecheck"
    wait "$lint" || { echo "== lint failed" >&2; checks_status=1; }
    cat "$logs/lint"
  fi
  return "$checks_status"
}

# The workflow code, bundled by webpack once for every worker of the run (workers/worker.ts reads the file). In the
# repository's node_modules/.cache: the multi-host test's hosts see the repository but have a /tmp and a .data of
# their own.
bundle="$PWD/node_modules/.cache/harness-s/workflow-bundle.json"
mkdir -p "$(dirname "$bundle")"
if ! npx tsx test/build-workflow-bundle.ts "$bundle"; then
  echo "== bundling the workflow code failed" >&2
  exit 1
fi
export HARNESS_S_WORKFLOW_BUNDLE="$bundle"

if [ "$mode" = fast ]; then
  checks || exit 1
  # Two workers: a workflow test mostly waits on its dev server.
  exec npx jest --selectProjects unit workflow --maxWorkers=2
fi

shards=${HARNESS_S_TEST_SHARDS:-2}
# Shard i of n: shard 1 on the default dev server and database (test/integration/env.ts), shard i on port
# 17233 + 10 (i - 1) (its UI 1000 above) and database harness_s_test_<i>.
# Each lane's Jest JSON report goes to .data/test-reports: `node test/file-times.mjs .data/test-reports/*.json` says
# where the time went, file by file (--write records it for the sequencer).
reports=.data/test-reports
rm -rf "$reports" && mkdir -p "$reports"
pids=()
for i in $(seq 1 "$shards"); do
  report=(--json --outputFile="$reports/integration-$i.json")
  if [ "$i" -eq 1 ]; then
    npx jest --selectProjects integration --runInBand --shard="1/$shards" "${report[@]}" & pids+=($!)
  else
    TEST_TEMPORAL_ADDRESS="127.0.0.1:$((17233 + 10 * (i - 1)))" TEST_DATABASE_URL="postgresql://postgres@127.0.0.1:5432/harness_s_test_$i" \
      npx jest --selectProjects integration --runInBand --shard="$i/$shards" "${report[@]}" >"$logs/shard-$i" 2>&1 & pids+=($!)
  fi
done
status=0
checks || status=1
npx jest --selectProjects unit workflow --json --outputFile="$reports/unit-workflow.json" >"$logs/fast" 2>&1 & fast=$!
wait "$fast"; fast_status=$?
[ "$fast_status" -eq 0 ] || status=1
echo "== unit and workflow tests (exit $fast_status)"
cat "$logs/fast"
for i in $(seq 1 "$shards"); do
  wait "${pids[$((i - 1))]}"; shard_status=$?
  [ "$shard_status" -eq 0 ] || status=1
  if [ "$i" -gt 1 ]; then echo "== integration shard $i of $shards (exit $shard_status)"; cat "$logs/shard-$i"; fi
  echo "== integration shard $i of $shards: exit $shard_status"
done
exit "$status"
