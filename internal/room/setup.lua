-- Sets up an item's room, once: a second call with the same commitment is
-- a no-op (instances may all try), with another it is refused.
local meta = KEYS[1]
local commitment = ARGV[1]
local pass_ttl_ms = ARGV[2]
local epoch = ARGV[3] -- random, new at each set-up: names this set-up

local have = redis.call('HGET', meta, 'commitment')
if have then
  if have == commitment then
    -- a room set up by a build without epochs gets one now, once
    redis.call('HSETNX', meta, 'epoch', epoch)
    return 'exists'
  end
  return 'conflict'
end
redis.call('HSET', meta, 'commitment', commitment, 'ttl', pass_ttl_ms,
  'phase', 'pre', 'seq', 0, 'pre', 0, 'head', 0, 'epoch', epoch)
return 'ok'
