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

# What no grant can cap (core/envs/dbbench/server-caps.ts; `harness-s doctor` reads them): InnoDB's shared
# temporary tablespace (ibtmp1, which only a restart shrinks), how far a session may raise its own
# max_heap_table_size (MEMORY and in-memory temporary tables), and tables put outside the datadir with
# DATA DIRECTORY (no FILE privilege needed). Read when the server starts.
CAPS_DIR=/etc/mysql/mariadb.conf.d
CAPS_FILE="$CAPS_DIR/60-harness-s-dbbench.cnf"
CAPS='[mariadbd]
innodb_temp_data_file_path = ibtmp1:12M:autoextend:max:1G
maximum-max_heap_table_size = 64M
symbolic-links = 0'
if [ -d "$CAPS_DIR" ] && [ "$(cat "$CAPS_FILE" 2>/dev/null)" != "$CAPS" ]; then
  printf '%s\n' "$CAPS" >"$CAPS_FILE"
  echo "db-users: wrote the DBBench server caps to $CAPS_FILE (read when MariaDB starts)"
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
if [ "$("$client" --protocol=TCP -h 127.0.0.1 -P 3306 -u root -N -e "SELECT @@innodb_temp_data_file_path")" != "ibtmp1:12M:autoextend:max:1G" ]; then
  # Not restarted here: other users of this server may be mid-way. The tests do not need the caps; doctor reports them.
  if [ -f "$CAPS_FILE" ]; then
    echo "db-users: the running MariaDB was started without $CAPS_FILE; restart it (service mariadb restart) to apply the DBBench caps"
  else
    echo "db-users: the running MariaDB lacks the DBBench caps and reads no $CAPS_DIR; add to its option file: $(echo "$CAPS" | tr '\n' ' ')"
  fi
fi
"$client" --protocol=TCP -h 127.0.0.1 -P 3306 -u root -N -e "SELECT CONCAT('db-users: server ', VERSION())"
