#!/bin/sh
# Temporal's two PostgreSQL databases and their schemas, brought up to the
# version of the admin-tools image (the same version as the server image).
# Run by the compose service `temporal-schema` before the server starts; safe
# on every `up`: existing databases are kept and only missing schema versions
# are applied.
#
# Env: POSTGRES_SEEDS (host), DB_PORT, POSTGRES_USER, SQL_PASSWORD (read by temporal-sql-tool).
set -eu

: "${POSTGRES_SEEDS:?POSTGRES_SEEDS (the PostgreSQL host) is not set}"
: "${POSTGRES_USER:?POSTGRES_USER is not set}"
: "${SQL_PASSWORD:?SQL_PASSWORD (the PostgreSQL password) is not set}"
DB_PORT="${DB_PORT:-5432}"
SCHEMA_ROOT=/etc/temporal/schema/postgresql/v12

sql_tool() {
  temporal-sql-tool --plugin postgres12 --ep "$POSTGRES_SEEDS" -p "$DB_PORT" -u "$POSTGRES_USER" "$@"
}

# database name, then the schema folder under $SCHEMA_ROOT
setup_database() {
  echo "temporal-schema: database $1"
  # `create` fails when the database exists (every `up` after the first); setup-schema below says if it is unusable.
  sql_tool --db "$1" create || echo "temporal-schema: $1 exists, keeping it"
  sql_tool --db "$1" setup-schema -v 0.0
  sql_tool --db "$1" update-schema -d "$SCHEMA_ROOT/$2/versioned"
}

echo "temporal-schema: waiting for PostgreSQL at $POSTGRES_SEEDS:$DB_PORT"
tries=0
until nc -z "$POSTGRES_SEEDS" "$DB_PORT"; do
  tries=$((tries + 1))
  if [ "$tries" -ge 60 ]; then
    echo "temporal-schema: PostgreSQL at $POSTGRES_SEEDS:$DB_PORT did not answer in 60 s" >&2
    exit 1
  fi
  sleep 1
done

setup_database temporal temporal
setup_database temporal_visibility visibility
echo "temporal-schema: done"
