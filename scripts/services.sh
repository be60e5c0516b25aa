#!/usr/bin/env bash
# Make sure PostgreSQL, Redis and RabbitMQ run on 127.0.0.1; install them (Debian) when missing.
set -euo pipefail

log() { printf '[services] %s\n' "$*"; }
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
wait_port() {
  local port=$1 name=$2 tries=${3:-60}
  for _ in $(seq "$tries"); do port_open "$port" && return 0; sleep 1; done
  log "$name did not open port $port"; return 1
}
SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
apt_updated=0
apt_install() {
  [ "$apt_updated" = 1 ] || { $SUDO apt-get update -qq; apt_updated=1; }
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

ensure_postgres() {
  if port_open 5432; then log "postgres: running"; return; fi
  if ! command -v pg_ctlcluster >/dev/null 2>&1; then
    log "postgres: installing"
    apt_install postgresql
    # The tests connect as 'postgres' over TCP without a password.
    for hba in /etc/postgresql/*/main/pg_hba.conf; do
      $SUDO sed -ri 's/^(host\s+all\s+all\s+(127\.0\.0\.1\/32|::1\/128)\s+)\S+/\1trust/' "$hba"
    done
  fi
  log "postgres: starting"
  local version; version=$(ls /etc/postgresql | sort -V | tail -n1)
  $SUDO pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
  wait_port 5432 postgres
}

ensure_redis() {
  if port_open 6379; then log "redis: running"; return; fi
  command -v redis-server >/dev/null 2>&1 || { log "redis: installing"; apt_install redis-server; }
  log "redis: starting"
  mkdir -p /var/lib/redis /var/log/redis 2>/dev/null || true
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log
  wait_port 6379 redis
}

ensure_rabbitmq() {
  if port_open 5672; then log "rabbitmq: running"; return; fi
  command -v rabbitmq-server >/dev/null 2>&1 || { log "rabbitmq: installing"; apt_install rabbitmq-server; }
  log "rabbitmq: starting"
  $SUDO rabbitmq-server -detached || true
  wait_port 5672 rabbitmq 120
}

ensure_postgres
ensure_redis
ensure_rabbitmq
# The hot standby the replica-read tests read from.
"$(dirname "$0")/replica.sh"
