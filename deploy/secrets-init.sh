#!/bin/sh
# compose.yaml's `secrets` service: runs before NATS and Redis start, creates one random
# password per NATS user and per Redis user once, and hands each container only its
# own (every secrets-<who> volume is mounted, read-only, by one consumer only):
#   /secrets/nats     nats_<user> of every NATS user  (the NATS server)
#   /secrets/redis    redis_<user> of every Redis user (the Redis server)
#   /secrets/<svc>    nats_<svc> and, but for the binder, redis_<svc>
#   /secrets/sentinel redis_sentinel, the Sentinels' Redis user (compose.ha.yaml mounts
#                     it; then /secrets/redis also gets redis_replica and redis_sentinel)
# Existing passwords are kept, so a restart rotates nothing; remove the volumes
# (`docker compose down -v`) to rotate them all. Nothing secret is in the image.
set -eu
umask 022  # the services read their passwords as their own (non-root) users
new_password() {
  # URL-safe: a password may also be written into KSCHED_*_URL
  head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n'
}
for user in publisher operator watcher queue cache worker binder; do
  file=/secrets/nats/nats_$user
  [ -s "$file" ] || new_password > "$file"
done
for user in watcher queue cache worker; do
  file=/secrets/redis/redis_$user
  [ -s "$file" ] || new_password > "$file"
done
if [ -d /secrets/sentinel ]; then  # the HA shape: replication and Sentinel users
  for user in replica sentinel; do
    file=/secrets/redis/redis_$user
    [ -s "$file" ] || new_password > "$file"
  done
  cp /secrets/redis/redis_sentinel /secrets/sentinel/
fi
for svc in watcher queue cache worker binder; do
  cp /secrets/nats/nats_$svc /secrets/$svc/
  [ "$svc" = binder ] || cp /secrets/redis/redis_$svc /secrets/$svc/
done
echo "secrets ready"
