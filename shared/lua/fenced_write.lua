-- fenced_write: a leader's batch of writes, applied only while no newer epoch exists.
-- KEYS[1]  = ksched:lease:<service>:epoch  (str: the newest epoch a leader wrote with)
-- KEYS[2…] = the keys the batch writes
-- ARGV[1]  = the writer's epoch; then per command: name, key index (into KEYS), stride, n,
--            and its n arguments. A stride > 0 splits the arguments into chunks of whole
--            stride-sized groups (field/value pairs: 2), since Lua unpacks only so many.
-- Epochs are handed out by leader election (a compare-and-set in a NATS KV bucket, never
-- twice); Redis keeps the newest it has seen. A writer below it gets the error FENCED and
-- nothing at all is written (a deposed leader never overwrites its successor). A writer
-- above it raises it ("set if greater": a new leader, or the current one bringing back an
-- epoch a Redis failover lost). An empty batch does only that.
-- A command EXPECT, first in the batch, is a precondition, not a write: its arguments
-- are field/value pairs its hash must hold (the state marker, runtime/watermark.py).
-- When one does not hold, the error EXPECTED comes back and nothing at all is written,
-- not even the epoch (a leader never writes over a state Redis lost). Both checks come
-- before any write, since a script's error reply undoes nothing. Returns the commands run.
-- Packed form: ARGV[2] = '+' and ARGV[3] = the commands above (from EXPECT on) as one
-- msgpack array of strings (cmsgpack reads msgpack's old raw format): a batch of
-- hundreds of fields costs its sender three arguments, not one per field.
local newest = tonumber(redis.call('GET', KEYS[1]) or '0')
local epoch = tonumber(ARGV[1])
if epoch < newest then
  return redis.error_reply('FENCED stale lease epoch ' .. ARGV[1] .. ' (newest ' .. newest .. ')')
end
local argv, i, commands = ARGV, 2, 0
if ARGV[2] == '+' then
  argv, i = cmsgpack.unpack(ARGV[3]), 1
end
if argv[i] == 'EXPECT' then
  local key, n = KEYS[tonumber(argv[i + 1])], tonumber(argv[i + 3])
  for j = i + 4, i + 3 + n, 2 do
    if redis.call('HGET', key, argv[j]) ~= argv[j + 1] then
      return redis.error_reply('EXPECTED ' .. key .. ' ' .. argv[j] .. ' ' .. argv[j + 1])
    end
  end
  i, commands = i + 4 + n, 1
end
if epoch > newest then
  redis.call('SET', KEYS[1], ARGV[1])
end
local CHUNK = 1000
while i <= #argv do
  local cmd, key = argv[i], KEYS[tonumber(argv[i + 1])]
  local stride, n = tonumber(argv[i + 2]), tonumber(argv[i + 3])
  local first, last = i + 4, i + 3 + n
  if stride == 0 or n <= CHUNK then
    redis.call(cmd, key, unpack(argv, first, last))
  else
    local step = stride * math.floor(CHUNK / stride)
    for s = first, last, step do
      redis.call(cmd, key, unpack(argv, s, math.min(s + step - 1, last)))
    end
  end
  commands = commands + 1
  i = last + 1
end
return commands
