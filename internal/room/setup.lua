-- Sets up an item's room, once: a second call with the same commitment is
-- a no-op (instances may all try), with another it is refused.
local meta = KEYS[1]
local commitment = ARGV[1]
local pass_ttl_ms = ARGV[2]

local have = redis.call('HGET', meta, 'commitment')
if have then
  if have == commitment then return 'exists' end
  return 'conflict'
end
redis.call('HSET', meta, 'commitment', commitment, 'ttl', pass_ttl_ms,
  'phase', 'pre', 'seq', 0, 'pre', 0, 'head', 0)
return 'ok'
