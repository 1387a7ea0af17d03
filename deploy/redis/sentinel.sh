#!/bin/sh
# compose.ha.yaml's Sentinels: writes the Sentinel config on the data volume at the first
# start (Sentinel rewrites it with what it learns: the current primary, its replicas, the
# other Sentinels, the epoch; a restart starts from there), then starts redis-server in
# Sentinel mode through the image's entrypoint. Names, not addresses: the servers and
# Sentinels are found through Docker's DNS (resolve-hostnames) and announced by their
# service names (announce-hostnames), which stay the same when a container is recreated.
#   KSCHED_SENTINEL_NAME   this Sentinel's service name (how the others reach it)
#   KSCHED_SENTINEL_MASTER "<master-name> <host> <port> <quorum>" (the first primary)
#   KSCHED_SENTINEL_DOWN_AFTER_MS, KSCHED_SENTINEL_FAILOVER_TIMEOUT_MS
set -eu
conf=/data/sentinel.conf
secret=/run/secrets/redis_sentinel
[ -s "$secret" ] || { echo "missing secret $secret" >&2; exit 1; }
if [ ! -s "$conf" ]; then
  set -- $KSCHED_SENTINEL_MASTER
  umask 077
  cat > "$conf" <<CONF
port 26379
dir /data
sentinel resolve-hostnames yes
sentinel announce-hostnames yes
sentinel announce-ip $KSCHED_SENTINEL_NAME
sentinel monitor $1 $2 $3 $4
sentinel auth-user $1 sentinel
sentinel auth-pass $1 $(tr -d '\r\n' < "$secret")
sentinel down-after-milliseconds $1 ${KSCHED_SENTINEL_DOWN_AFTER_MS:-5000}
sentinel failover-timeout $1 ${KSCHED_SENTINEL_FAILOVER_TIMEOUT_MS:-30000}
sentinel parallel-syncs $1 1
CONF
fi
exec docker-entrypoint.sh redis-server "$conf" --sentinel
