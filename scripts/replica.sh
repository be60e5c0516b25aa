#!/usr/bin/env bash
# Make sure a hot standby of the local PostgreSQL streams on 127.0.0.1:5433 (the replica the
# replica-read tests read from): a base backup of the primary (pg_basebackup -R), started with
# pg_ctl under the postgres user. Run after scripts/services.sh.
set -euo pipefail

PORT=${ASANOHA_REPLICA_PORT:-5433}
log() { printf '[replica] %s\n' "$*"; }
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
as_postgres() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else sudo -u postgres "$@"; fi; }
in_recovery() {
  [ "$(psql -h 127.0.0.1 -p "$PORT" -U postgres -d postgres -Atc 'SELECT pg_is_in_recovery()' 2>/dev/null)" = t ]
}
# A standby that started but cannot stream (the WAL it needs is gone from the primary) would
# stay behind for ever: it must be seen streaming within 30 s.
streaming() {
  for _ in $(seq 30); do
    [ "$(psql -h 127.0.0.1 -p "$PORT" -U postgres -d postgres -Atc \
      "SELECT count(*) FROM pg_stat_wal_receiver WHERE status = 'streaming'" 2>/dev/null)" = 1 ] && return 0
    sleep 1
  done
  return 1
}

version=$(ls /etc/postgresql | sort -V | tail -n1)
bin=/usr/lib/postgresql/$version/bin
data=/var/lib/postgresql/asanoha-replica-$version
hba=/etc/postgresql/$version/main/pg_hba.conf
logfile=/var/log/postgresql/asanoha-replica.log

# A standby that falls behind a busy primary by more than the WAL the primary keeps can never
# catch up (no replication slot: a dead standby must not fill the primary's disk). Keep a
# bounded amount of WAL for it.
if [ "$(psql -h 127.0.0.1 -p 5432 -U postgres -d postgres -Atc \
  "SELECT setting::bigint < 1024 FROM pg_settings WHERE name = 'wal_keep_size'")" = t ]; then
  log "keeping 1 GB of WAL on the primary for the standby"
  psql -h 127.0.0.1 -p 5432 -U postgres -d postgres -Atc "ALTER SYSTEM SET wal_keep_size = '1GB'" >/dev/null
  psql -h 127.0.0.1 -p 5432 -U postgres -d postgres -Atc 'SELECT pg_reload_conf()' >/dev/null
fi

if port_open "$PORT"; then
  if in_recovery && streaming; then log "running on port $PORT"; exit 0; fi
  ours=$(psql -h 127.0.0.1 -p "$PORT" -U postgres -d postgres -Atc 'SHOW data_directory' 2>/dev/null || true)
  if in_recovery && [ "$ours" = "$data" ]; then
    # Ours, but lost: the WAL it needs is gone from the primary. Made again below.
    log "the standby on port $PORT does not stream (WAL it needs is gone): making it again"
    as_postgres "$bin/pg_ctl" -D "$data" -m fast stop >/dev/null 2>&1 || true
    lost=1
  elif in_recovery; then
    log "the standby on port $PORT does not stream from the primary: see its log"; exit 1
  else
    log "port $PORT answers but is not a standby: set ASANOHA_REPLICA_PORT to a free port"; exit 1
  fi
fi

# The primary must let 127.0.0.1 stream its WAL (its other connections are trust already).
if ! grep -Eq '^host\s+replication\s+all\s+127\.0\.0\.1/32\s+trust' "$hba"; then
  log "allowing replication connections from 127.0.0.1"
  echo 'host replication all 127.0.0.1/32 trust' >> "$hba"
  psql -h 127.0.0.1 -p 5432 -U postgres -d postgres -Atc 'SELECT pg_reload_conf()' >/dev/null
fi

start() {
  as_postgres "$bin/pg_ctl" -D "$data" -l "$logfile" -w -t 60 start >/dev/null
}

make_standby() {
  log "base backup of the primary into $data"
  rm -rf "$data"
  as_postgres "$bin/pg_basebackup" -h 127.0.0.1 -p 5432 -U postgres -D "$data" -R -X stream -c fast
  # Debian keeps the primary's configuration in /etc: the standby gets a small one of its own.
  as_postgres tee "$data/postgresql.conf" >/dev/null <<CONF
port = $PORT
listen_addresses = '127.0.0.1'
unix_socket_directories = '/var/run/postgresql'
hot_standby = on
max_connections = 200
shared_buffers = 64MB
hba_file = '$data/pg_hba.conf'
ident_file = '$data/pg_ident.conf'
CONF
  as_postgres tee "$data/pg_hba.conf" >/dev/null <<'CONF'
local all all trust
host all all 127.0.0.1/32 trust
CONF
  as_postgres touch "$data/pg_ident.conf"
}

touch "$logfile" && chown postgres "$logfile" 2>/dev/null || true
if [ -z "${lost:-}" ] && [ -f "$data/standby.signal" ] && start && in_recovery && streaming; then
  log "started on port $PORT"; exit 0
fi
# A standby that cannot start or follow (the primary was rebuilt, WAL it needs is gone) is
# made again from a fresh base backup.
as_postgres "$bin/pg_ctl" -D "$data" -m fast stop >/dev/null 2>&1 || true
make_standby
start
in_recovery && streaming || { log "the standby on port $PORT does not stream: see $logfile"; exit 1; }
log "started on port $PORT"
