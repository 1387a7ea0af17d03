-- snapshot_delta: the nodes whose generation moved past a worker's last refresh.
-- KEYS[1] = ksched:cache:generations  (zset: node name -> generation of its last change)
-- KEYS[2] = ksched:cache:nodeinfo     (hash: node name -> msgpack NodeInfo record)
-- KEYS[3] = ksched:cache:state        (hash: the state marker, runtime/watermark.py)
-- ARGV[1] = the generation the caller has already seen
-- ARGV[2] = the incarnation of the cache's state it was seen in
-- Returns the state's incarnation (false: none, Redis lost the state), then a flat list:
-- name, generation, record-or-false, ... (false: node gone). In another incarnation
-- than the caller's, every node: generations of different incarnations do not compare.
local incarnation = redis.call('HGET', KEYS[3], 'incarnation')
local out = {incarnation or false}
if not incarnation then
  return out
end
local since = '(' .. ARGV[1]
if incarnation ~= ARGV[2] then
  since = '-inf'
end
local changed = redis.call('ZRANGEBYSCORE', KEYS[1], since, '+inf', 'WITHSCORES')
for i = 1, #changed, 2 do
  out[#out + 1] = changed[i]
  out[#out + 1] = changed[i + 1]
  out[#out + 1] = redis.call('HGET', KEYS[2], changed[i]) or false
end
return out
