#!/bin/sh
# Renders the ACL users from the docker secrets (/run/secrets/redis_<user>), then starts
# redis-server through the image's own entrypoint (which drops root) with that ACL file.
set -eu
acl=/tmp/ksched-users.acl
umask 027
# ACL files allow no comments: the template's are dropped
grep -v -e "^#" -e "^\s*$" /etc/redis/users.acl.template > "$acl"
for user in watcher queue cache worker; do
  secret="/run/secrets/redis_$user"
  [ -s "$secret" ] || { echo "missing secret $secret" >&2; exit 1; }
  pass=$(tr -d '\r\n' < "$secret")
  upper=$(echo "$user" | tr '[:lower:]' '[:upper:]')
  sed -i "s|@$upper@|$pass|" "$acl"
done
if id redis >/dev/null 2>&1; then chown redis "$acl"; fi
exec docker-entrypoint.sh redis-server --aclfile "$acl" "$@"
