-- Install a lua-async gate built from the database and the streams, unless
-- one exists already: concurrent builders race here and the first one
-- wins. The buyers were written to a temporary key first.
-- Replies {status}: 'built', or 'exists'.
local meta = KEYS[1]
local buyers = KEYS[2]
local new_buyers = KEYS[3]
local released = KEYS[4]
local stock, taken, starts, ends = ARGV[1], ARGV[2], ARGV[3], ARGV[4] -- starts, ends: unix ms, 0 = none
local epoch = ARGV[5] -- the queue epoch the enqueue script stamps on each entry
-- ARGV[6..]: ids of the item's cancelled orders, read in the same database
-- snapshot as sold (see build.lua).
local first_cancelled = 6

if redis.call('EXISTS', meta) == 1 then
  redis.call('DEL', new_buyers)
  return {'exists'}
end
if redis.call('EXISTS', new_buyers) == 1 then
  redis.call('RENAME', new_buyers, buyers)
  redis.call('PERSIST', buyers)
else
  redis.call('DEL', buyers)
end
redis.call('DEL', released)
for i = first_cancelled, #ARGV, 1000 do
  redis.call('SADD', released, unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
redis.call('HSET', meta, 'stock', stock, 'taken', taken, 'starts', starts, 'ends', ends, 'soldout', '', 'epoch', epoch)
return {'built'}
