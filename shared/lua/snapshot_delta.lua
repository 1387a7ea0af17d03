-- snapshot_delta: the nodes whose generation moved past a worker's last refresh.
-- KEYS[1] = ksched:cache:generations  (zset: node name -> generation of its last change)
-- KEYS[2] = ksched:cache:nodeinfo     (hash: node name -> msgpack NodeInfo record)
-- KEYS[3] = ksched:cache:state        (hash: the state marker, runtime/watermark.py)
-- KEYS[4] = ksched:cache:generation   (the cache's generation as of its last write)
-- ARGV[1] = the generation the caller holds every change through
-- ARGV[2] = the incarnation of the cache's state it was seen in
-- ARGV[3...] = nodes the caller wants read whatever their generation (the node-change
--   feed left them out of step, shared/snapshot.py)
-- Returns the state's incarnation (false: none, Redis lost the state), the cache's
-- generation (false: not written), then a flat list: name, generation, record-or-false,
-- ... (false: node gone; the nodes asked for by name come with generation false: their
-- records carry it). In another incarnation than the caller's, every node: generations
-- of different incarnations do not compare.
local incarnation = redis.call('HGET', KEYS[3], 'incarnation')
if not incarnation then
  return {false}
end
local out = {incarnation, redis.call('GET', KEYS[4])}
local since = '(' .. ARGV[1]
local wanted = 3
if incarnation ~= ARGV[2] then
  since = '-inf'
  wanted = #ARGV + 1
end
local changed = redis.call('ZRANGEBYSCORE', KEYS[1], since, '+inf', 'WITHSCORES')
for i = 1, #changed, 2 do
  out[#out + 1] = changed[i]
  out[#out + 1] = changed[i + 1]
  out[#out + 1] = redis.call('HGET', KEYS[2], changed[i]) or false
end
for i = wanted, #ARGV do
  out[#out + 1] = ARGV[i]
  out[#out + 1] = false  -- the record says; the worker's ACL has no ZSCORE
  out[#out + 1] = redis.call('HGET', KEYS[2], ARGV[i]) or false
end
return out
