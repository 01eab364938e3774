#!/usr/bin/env bash
# DBBench's MySQL-compatible server for CI: make sure it answers and that the
# admin account the tests use (DBBENCH_MYSQL_URL, default root with an empty
# password on 127.0.0.1:3306) can log in over TCP. Idempotent; run as root.
# Episode databases and users are created by the tests themselves.
set -euo pipefail

URL="${DBBENCH_MYSQL_URL:-mysql://root@127.0.0.1:3306}"
DEFAULT_URL="mysql://root@127.0.0.1:3306"
client="$(command -v mariadb || command -v mysql || true)"
admin="$(command -v mariadb-admin || command -v mysqladmin || true)"
if [ -z "$client" ] || [ -z "$admin" ]; then
  echo "db-users: no mariadb/mysql client on PATH; install mariadb-client" >&2
  exit 1
fi

if [ "$URL" != "$DEFAULT_URL" ]; then
  # A server set up elsewhere (compose, a remote MySQL): check the login only, change nothing.
  rest="${URL#mysql://}"; creds="${rest%%@*}"; hostport="${rest#*@}"; hostport="${hostport%%/*}"
  user="${creds%%:*}"; pass=""; [ "$creds" != "$user" ] && pass="${creds#*:}"
  host="${hostport%%:*}"; port="3306"; [ "$hostport" != "$host" ] && port="${hostport#*:}"
  MYSQL_PWD="$pass" "$client" --protocol=TCP -h "$host" -P "$port" -u "$user" -e "SELECT 1" >/dev/null
  echo "db-users: $user@$host:$port logs in (DBBENCH_MYSQL_URL); nothing changed"
  exit 0
fi

if ! "$admin" --protocol=socket ping >/dev/null 2>&1; then
  echo "db-users: MariaDB is not answering on its socket; starting it"
  service mariadb start >/dev/null 2>&1 || service mysql start >/dev/null 2>&1 \
    || start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd >/dev/null 2>&1 || true
  for _ in $(seq 1 30); do "$admin" --protocol=socket ping >/dev/null 2>&1 && break; sleep 1; done
  "$admin" --protocol=socket ping >/dev/null
fi

if "$client" --protocol=TCP -h 127.0.0.1 -P 3306 -u root -e "SELECT 1" >/dev/null 2>&1; then
  echo "db-users: root logs in over TCP on 127.0.0.1:3306 with an empty password; nothing to do"
else
  # Debian's root@localhost authenticates by unix socket only; give TCP from 127.0.0.1 its own account.
  "$client" --protocol=socket -u root <<'SQL'
CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY '';
GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;
SQL
  "$client" --protocol=TCP -h 127.0.0.1 -P 3306 -u root -e "SELECT 1" >/dev/null
  echo "db-users: created root@127.0.0.1 (empty password, all privileges) so the tests can log in over TCP"
fi
"$client" --protocol=TCP -h 127.0.0.1 -P 3306 -u root -N -e "SELECT CONCAT('db-users: server ', VERSION())"
