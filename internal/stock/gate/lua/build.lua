-- Create an item's gate from the database, unless it already exists:
-- concurrent builders race here and the first one wins.
-- Replies {status}: 'built', or 'exists'.
local meta = KEYS[1]
local released = KEYS[2]
local stock, sold, starts, ends = ARGV[1], ARGV[2], ARGV[3], ARGV[4] -- starts, ends: unix ms, 0 = none
-- ARGV[5..]: ids of the item's cancelled orders, read in the same database
-- snapshot as sold: sold already left them out, so the gate counts them as
-- released and a later release of one of them changes nothing.
local first_cancelled = 5

if redis.call('EXISTS', meta) == 1 then
  return {'exists'}
end
redis.call('DEL', released)
for i = first_cancelled, #ARGV, 1000 do
  redis.call('SADD', released, unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
redis.call('HSET', meta, 'stock', stock, 'taken', sold, 'starts', starts, 'ends', ends, 'soldout', '')
return {'built'}
