-- fenced_write: a leader's batch of writes, applied only while its epoch is current.
-- KEYS[1]  = ksched:lease:<service>:epoch  (str: the latest epoch handed out)
-- KEYS[2…] = the keys the batch writes
-- ARGV[1]  = the writer's epoch; then per command: name, key index (into KEYS), stride, n,
--            and its n arguments. A stride > 0 splits the arguments into chunks of whole
--            stride-sized groups (field/value pairs: 2), since Lua unpacks only so many.
-- A command EXPECT (first in the batch) is a precondition, not a write: its arguments
-- are field/value pairs its hash must hold (the state marker, runtime/watermark.py).
-- Returns the number of commands run, or the error FENCED when a newer leader exists,
-- or EXPECTED when a precondition does not hold: then nothing at all is written (a
-- deposed leader never overwrites its successor, nor a leader a state Redis lost).
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return redis.error_reply('FENCED stale lease epoch ' .. ARGV[1])
end
local CHUNK = 1000
local i, commands = 2, 0
while i <= #ARGV do
  local cmd, key = ARGV[i], KEYS[tonumber(ARGV[i + 1])]
  local stride, n = tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3])
  local first, last = i + 4, i + 3 + n
  if cmd == 'EXPECT' then
    for j = first, last, 2 do
      if redis.call('HGET', key, ARGV[j]) ~= ARGV[j + 1] then
        return redis.error_reply('EXPECTED ' .. key .. ' ' .. ARGV[j] .. ' ' .. ARGV[j + 1])
      end
    end
  elseif stride == 0 or n <= CHUNK then
    redis.call(cmd, key, unpack(ARGV, first, last))
  else
    local step = stride * math.floor(CHUNK / stride)
    for s = first, last, step do
      redis.call(cmd, key, unpack(ARGV, s, math.min(s + step - 1, last)))
    end
  end
  commands = commands + 1
  i = last + 1
end
return commands
