#!/bin/sh
# Renders the ACL users from the docker secrets (/run/secrets/redis_<user>), then starts
# redis-server through the image's own entrypoint (which drops root) with a config file
# on the data volume that loads them.
#
# The config file (/data/ksched-redis.conf) is redis-server's own, so that Sentinel's
# CONFIG REWRITE keeps a role it changed (a replica promoted, a primary demoted) across
# restarts (compose.ha.yaml). KSCHED_REDIS_REPLICAOF ("host port") sets the role at the
# first start only; the ACL file and the replication user's password are set anew at
# every start.
set -eu
acl=/tmp/ksched-users.acl
conf=/data/ksched-redis.conf
umask 027
# ACL files allow no comments: the templates' are dropped. users.acl.template has the
# services' users; HA adds ha-users.acl.template (replication, Sentinel) when mounted.
cat /etc/redis/*.acl.template | grep -v -e "^#" -e "^\s*$" > "$acl"
for secret in /run/secrets/redis_*; do
  [ -s "$secret" ] || continue
  user=${secret#/run/secrets/redis_}
  upper=$(echo "$user" | tr '[:lower:]' '[:upper:]')
  sed -i "s|@$upper@|$(tr -d '\r\n' < "$secret")|" "$acl"
done
if grep -q "@[A-Z]*@" "$acl"; then
  echo "missing secrets for: $(grep -o "@[A-Z]*@" "$acl" | tr '\n' ' ')" >&2
  exit 1
fi
if [ ! -e /data/.ksched-role-set ]; then
  if [ -n "${KSCHED_REDIS_REPLICAOF:-}" ]; then echo "replicaof $KSCHED_REDIS_REPLICAOF" >> "$conf"; fi
  touch /data/.ksched-role-set
fi
touch "$conf"
sed -i -e '/^aclfile /d' -e '/^masteruser /d' -e '/^masterauth /d' "$conf"
echo "aclfile $acl" >> "$conf"
if [ -s /run/secrets/redis_replica ]; then  # every server may be demoted: all sync as `replica`
  printf 'masteruser replica\nmasterauth %s\n' "$(tr -d '\r\n' < /run/secrets/redis_replica)" >> "$conf"
fi
if id redis >/dev/null 2>&1; then chown redis "$acl" "$conf"; fi
exec docker-entrypoint.sh redis-server "$conf" "$@"
