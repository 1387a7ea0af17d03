#!/bin/sh
# Creates deploy/secrets/: one random password per NATS user (nats_<user>) and per Redis
# user (redis_<user>), for compose.yaml's docker secrets. Existing files are kept, so
# rerunning it rotates nothing; delete a file to rotate that password. Never committed.
set -eu
dir="$(dirname "$0")/secrets"
mkdir -p "$dir"
chmod 700 "$dir"
for name in nats_publisher nats_operator nats_watcher nats_queue nats_cache nats_worker nats_binder \
            redis_watcher redis_queue redis_cache redis_worker; do
  file="$dir/$name"
  if [ ! -s "$file" ]; then
    # URL-safe: the passwords may also be written into KSCHED_*_URL
    head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$file"
    # readable inside the containers, which run as their own users; the directory
    # keeps other host users out
    chmod 644 "$file"
  fi
done
echo "secrets in $dir"
