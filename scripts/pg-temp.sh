#!/usr/bin/env bash
# A private, throwaway PostgreSQL 15 cluster for the test suites.
#   scripts/pg-temp.sh start DIR PORT   -> initdb + start; prints the connection URL
#   scripts/pg-temp.sh stop DIR
#   scripts/pg-temp.sh resume DIR PORT  -> start a cluster made by `start` again (kept, e.g. a bench
#                                          cache); prints the connection URL
#   scripts/pg-temp.sh halt DIR         -> stop it without removing DIR
# initdb refuses to run as root, so as root the cluster belongs to the unprivileged user
# named by BULWARK_PG_USER (default: nobody); the socket lives in DIR, never in /var/run.
set -euo pipefail
PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
cmd=${1:?usage: pg-temp.sh start DIR PORT | stop DIR | resume DIR PORT | halt DIR}
dir=${2:?DIR required}

as_owner() {
  if [ "$(id -u)" = 0 ]; then
    runuser -u "${BULWARK_PG_USER:-nobody}" -- "$@"
  else
    "$@"
  fi
}

case "$cmd" in
  start)
    port=${3:?PORT required}
    [ -x "$PG_BIN/initdb" ] || { echo "PostgreSQL binaries not found in $PG_BIN (set PG_BIN)" >&2; exit 1; }
    mkdir -p "$dir"
    chmod 755 "$dir"
    mkdir -p "$dir/data" "$dir/sock"
    [ "$(id -u)" = 0 ] && chown -R "${BULWARK_PG_USER:-nobody}" "$dir"
    chmod 700 "$dir/data"
    as_owner "$PG_BIN/initdb" -D "$dir/data" -U postgres --auth=trust --no-sync -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 \
      || { cat "$dir/initdb.log" >&2; exit 1; }
    as_owner "$PG_BIN/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w -t 60 \
      -o "-p $port -k $dir/sock -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200" \
      start >/dev/null || { cat "$dir/postgres.log" >&2; exit 1; }
    echo "postgres://postgres@127.0.0.1:$port/postgres"
    ;;
  resume)
    port=${3:?PORT required}
    [ -x "$PG_BIN/pg_ctl" ] || { echo "PostgreSQL binaries not found in $PG_BIN (set PG_BIN)" >&2; exit 1; }
    [ -f "$dir/data/PG_VERSION" ] || { echo "no cluster in $dir/data (make one with: pg-temp.sh start DIR PORT)" >&2; exit 1; }
    dir=$(cd "$dir" && pwd) # the socket directory is passed to postgres, which runs in the data dir
    mkdir -p "$dir/sock"
    [ "$(id -u)" = 0 ] && chown -R "${BULWARK_PG_USER:-nobody}" "$dir"
    as_owner "$PG_BIN/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w -t 60 \
      -o "-p $port -k $dir/sock -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200" \
      start >/dev/null || { tail -n 30 "$dir/postgres.log" >&2; exit 1; }
    echo "postgres://postgres@127.0.0.1:$port/postgres"
    ;;
  halt)
    [ -d "$dir/data" ] && as_owner "$PG_BIN/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
    ;;
  stop)
    [ -d "$dir/data" ] && as_owner "$PG_BIN/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
    rm -rf "$dir"
    ;;
  *)
    echo "usage: pg-temp.sh start DIR PORT | stop DIR | resume DIR PORT | halt DIR" >&2
    exit 2
    ;;
esac
