-- Last step of the opening: the draw's two strings are written whole (4
-- bytes a pre-queue ticket each) and its leaves (32 bytes each), so
-- admission may start, and the seed and the transcript are revealed.
local meta, rank, draw, leaves = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local seed, transcript = ARGV[1], ARGV[2]

local m = redis.call('HMGET', meta, 'phase', 'pre')
local phase, pre = m[1], tonumber(m[2])
if phase == 'open' then return 'open' end
if phase ~= 'opening' then return 'notopening' end
if redis.call('STRLEN', rank) ~= 4 * pre or redis.call('STRLEN', draw) ~= 4 * pre
  or redis.call('STRLEN', leaves) ~= 32 * pre then
  return 'incomplete'
end
redis.call('HSET', meta, 'phase', 'open', 'seed', seed, 'transcript', transcript)
return 'open'
