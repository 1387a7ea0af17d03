-- snapshot_delta: the nodes whose generation moved past a worker's last refresh.
-- KEYS[1] = ksched:cache:generations  (zset: node name -> generation of its last change)
-- KEYS[2] = ksched:cache:nodeinfo     (hash: node name -> msgpack NodeInfo record)
-- ARGV[1] = the generation the caller has already seen
-- Returns a flat list: name, generation, record-or-false, ... (false: node gone).
local changed = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. ARGV[1], '+inf', 'WITHSCORES')
local out = {}
for i = 1, #changed, 2 do
  out[#out + 1] = changed[i]
  out[#out + 1] = changed[i + 1]
  out[#out + 1] = redis.call('HGET', KEYS[2], changed[i]) or false
end
return out
