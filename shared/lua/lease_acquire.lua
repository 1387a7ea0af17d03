-- lease_acquire: kube's tryAcquireOrRenew, atomically, for one service's lease.
-- KEYS[1] = ksched:lease:<service>        (hash: holder, epoch; expires after the lease)
-- KEYS[2] = ksched:lease:<service>:epoch  (str: the latest epoch handed out, never expires)
-- ARGV[1] = the candidate's identity
-- ARGV[2] = the epoch the candidate holds ("0": none, it stands by)
-- ARGV[3] = the lease duration in milliseconds
-- Returns {acquired 0|1, epoch, holder, milliseconds until the holder's lease lapses}.
-- A new holder gets a new epoch (the fencing token every write of it carries).
local holder = redis.call('HGET', KEYS[1], 'holder')
if holder then
  local epoch = redis.call('HGET', KEYS[1], 'epoch')
  if holder == ARGV[1] and epoch == ARGV[2] then
    redis.call('PEXPIRE', KEYS[1], ARGV[3])
    return {1, epoch, holder, tonumber(ARGV[3])}
  end
  return {0, epoch, holder, redis.call('PTTL', KEYS[1])}
end
if ARGV[2] ~= '0' then
  -- our own lease lapsed unrenewed: a leader that missed its renew deadline steps down
  return {0, ARGV[2], '', 0}
end
local epoch = redis.call('INCR', KEYS[2])
redis.call('HSET', KEYS[1], 'holder', ARGV[1], 'epoch', epoch)
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return {1, tostring(epoch), ARGV[1], tonumber(ARGV[3])}
