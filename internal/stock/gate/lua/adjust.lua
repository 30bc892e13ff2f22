-- Change one bucket's stock by a number of units, for a stock change of an
-- item with several buckets (the shop holds the item's row lock in the
-- database meanwhile). A raise adds them all; a cut takes only free units
-- (stock - taken), at most as many as asked. Once per operation id: a
-- rerun answers what the first run did.
-- Replies {'ok', units changed (signed)} or {'missing'} (no gate).
local meta = KEYS[1]
local op = KEYS[2]         -- this operation's marker: what it changed
local delta = tonumber(ARGV[1])
local op_ttl = ARGV[2]     -- seconds

local prev = redis.call('GET', op)
if prev then
  return {'ok', prev}
end
if redis.call('EXISTS', meta) == 0 then
  return {'missing'}
end
local changed = delta
if delta < 0 then
  local m = redis.call('HMGET', meta, 'stock', 'taken')
  local free = math.max(0, (tonumber(m[1]) or 0) - (tonumber(m[2]) or 0))
  changed = -math.min(-delta, free)
end
if changed ~= 0 then
  redis.call('HINCRBY', meta, 'stock', changed)
end
-- Units came in, or the sold-out mark goes, which may free some: either
-- way Rebalance's double collect must see a change (see rebalance.go).
redis.call('HINCRBY', meta, 'moves', 1)
redis.call('HSET', meta, 'soldout', '')
redis.call('SET', op, tostring(changed), 'EX', op_ttl)
return {'ok', tostring(changed)}
