#!/bin/sh
# Reads each user's password from its docker secret (/run/secrets/nats_<user>) into the
# environment variable nats.conf names, then starts nats-server with that config.
set -eu
for user in publisher operator watcher queue cache worker binder; do
  secret="/run/secrets/nats_$user"
  [ -s "$secret" ] || { echo "missing secret $secret" >&2; exit 1; }
  upper=$(echo "$user" | tr '[:lower:]' '[:upper:]')
  export "KSCHED_NATS_${upper}_PASSWORD=$(tr -d '\r\n' < "$secret")"
done
exec nats-server -c /etc/nats/nats.conf "$@"
