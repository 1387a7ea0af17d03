-- snapshot_delta: one page of the nodes whose generation moved past a worker's last
-- refresh (shared/snapshot.py pages a refresh: a script holds Redis, and every other
-- client waits, for as long as it runs).
-- KEYS[1] = ksched:cache:generations  (zset: node name -> generation of its last change)
-- KEYS[2] = ksched:cache:nodeinfo     (hash: node name -> msgpack NodeInfo record)
-- KEYS[3] = ksched:cache:state        (hash: the state marker, runtime/watermark.py)
-- KEYS[4] = ksched:cache:generation   (the cache's generation as of its last write)
-- ARGV[1] = the generation the caller holds every change through
-- ARGV[2] = the incarnation of the cache's state it was seen in
-- ARGV[3] = the page: how many nodes this call reads at most
-- ARGV[4], ARGV[5], ARGV[6] = the cursor the page before returned ('' on the first page:
--   the nodes after ARGV[1]): a generation, how many of its nodes were read, and how many
--   had it then
-- ARGV[7...] = nodes the caller wants read whatever their generation (the node-change
--   feed left them out of step, shared/snapshot.py); they count in the page
-- Returns the state's incarnation (false: none, Redis lost the state), the cache's
-- generation (false: not written), the cursor of the next page (three values; false:
-- this page reached the last node), then a flat list: name, generation, record-or-false,
-- ... (false: node gone; the nodes asked for by name come with generation false: their
-- records carry it). In another incarnation than the caller's, every node: generations
-- of different incarnations do not compare.
-- Why a cursor never misses a node: one cache write gives its nodes one generation,
-- higher than any in the zset, so a node that changes leaves its generation for one past
-- the cursor (read later), and no node ever joins a generation already there. The nodes
-- of one generation sort by name, and those that left it since the page before can only
-- shift the rest towards its start: skipping as many fewer than were read keeps every
-- node not yet read (some read twice, as the first cache write gives every node one
-- generation, longer than a page).
local incarnation = redis.call('HGET', KEYS[3], 'incarnation')
if not incarnation then
  return {false}
end
local page = tonumber(ARGV[3])
local min, skip, first = '(' .. ARGV[1], 0, 7
if incarnation ~= ARGV[2] then
  min = '-inf'
  first = #ARGV + 1
end
if ARGV[4] ~= '' then
  min = ARGV[4]
  local left = tonumber(ARGV[6]) - redis.call('ZCOUNT', KEYS[1], min, min)
  skip = math.max(0, tonumber(ARGV[5]) - math.max(0, left))
end
local out = {incarnation, redis.call('GET', KEYS[4]), ARGV[4], ARGV[5], ARGV[6]}
local limit = page - (#ARGV + 1 - first)
if limit > 0 then
  local changed = redis.call('ZRANGEBYSCORE', KEYS[1], min, '+inf', 'WITHSCORES', 'LIMIT', skip, limit)
  local n = #changed / 2
  if n < limit then
    out[3], out[4], out[5] = false, false, false
  else
    local last, read = changed[#changed], 0
    for i = #changed, 2, -2 do
      if changed[i] ~= last then
        break
      end
      read = read + 1
    end
    if last == ARGV[4] then
      read = read + skip -- the page did not leave the cursor's generation
    end
    out[3], out[4], out[5] = last, read, redis.call('ZCOUNT', KEYS[1], last, last)
  end
  for i = 1, #changed, 2 do
    out[#out + 1] = changed[i]
    out[#out + 1] = changed[i + 1]
    out[#out + 1] = redis.call('HGET', KEYS[2], changed[i]) or false
  end
end
for i = first, #ARGV do
  out[#out + 1] = ARGV[i]
  out[#out + 1] = false -- the record says; the worker's ACL has no ZSCORE
  out[#out + 1] = redis.call('HGET', KEYS[2], ARGV[i]) or false
end
return out
