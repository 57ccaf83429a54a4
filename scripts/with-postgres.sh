#!/usr/bin/env bash
# Runs a command beside a throwaway PostgreSQL server (issue 17's tests):
# `initdb` into a temporary directory as an unprivileged user (nobody when run
# as root), the server on a free loopback port with trust auth for a role
# `hookbox` and a database `hookbox`, then `COMMAND...` with
#   HOOKBOX_TEST_POSTGRES=postgres://hookbox@127.0.0.1:PORT/hookbox
#   HOOKBOX_TEST_PG_CTL=<a script: `$HOOKBOX_TEST_PG_CTL restart|stop|start` controls
#                        this server, as its user, e.g. to restart it mid-run>
# in its environment. The server is stopped and the directory removed when the
# command ends, however it ends; the command's exit status is this script's.
#
# Usage: scripts/with-postgres.sh COMMAND [ARG...]
# Needs Debian's `postgresql` package (PostgreSQL 15 on this machine kind).
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: scripts/with-postgres.sh COMMAND [ARG...]" >&2; exit 2; }
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
[ -n "$bin" ] && [ -x "$bin/initdb" ] || { echo "with-postgres: no PostgreSQL server binaries under /usr/lib/postgresql (apt-get install postgresql)" >&2; exit 1; }
dir=$(mktemp -d /tmp/hookbox-pg.XXXXXX)
as=()
if [ "$(id -u)" = 0 ]; then
  chown nobody:nogroup "$dir"
  as=(runuser -u nobody --)
fi
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cleanup() {
  "${as[@]}" "$bin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT
"${as[@]}" "$bin/initdb" -D "$dir/data" -U hookbox --auth=trust --encoding=UTF8 --no-sync >"$dir/initdb.log" 2>&1 ||
  { cat "$dir/initdb.log" >&2; exit 1; }
"${as[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 30 \
  -o "-h 127.0.0.1 -p $port -k $dir -c fsync=off -c max_connections=200" start >/dev/null ||
  { cat "$dir/server.log" >&2; exit 1; }
"${as[@]}" "$bin/createdb" -h 127.0.0.1 -p "$port" -U hookbox hookbox
export HOOKBOX_TEST_POSTGRES="postgres://hookbox@127.0.0.1:$port/hookbox"
ctl="$dir/pg_ctl"
printf '#!/bin/sh\nexec %s %s -D %s -l %s -w -t 30 -m fast -o "-h 127.0.0.1 -p %s -k %s -c fsync=off -c max_connections=200" "$@"\n' \
  "${as[*]}" "$bin/pg_ctl" "$dir/data" "$dir/server.log" "$port" "$dir" > "$ctl"
chmod 755 "$ctl"
export HOOKBOX_TEST_PG_CTL="$ctl"
set +e
"$@"
status=$?
set -e
exit $status
