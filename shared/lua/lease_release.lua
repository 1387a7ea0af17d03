-- lease_release: a leader that stops cleanly hands its lease back (kube's ReleaseOnCancel),
-- so that a standby takes over at its next try instead of after the lease duration.
-- KEYS[1] = ksched:lease:<service>  (hash: holder, epoch)
-- ARGV[1] = the leader's identity, ARGV[2] = its epoch
-- Returns 1 when released, 0 when the lease was no longer ours.
if redis.call('HGET', KEYS[1], 'holder') == ARGV[1]
    and redis.call('HGET', KEYS[1], 'epoch') == ARGV[2] then
  return redis.call('DEL', KEYS[1])
end
return 0
