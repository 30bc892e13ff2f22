-- Return a cancelled order's unit to the gate, once per order id.
-- Replies {status}: 'released' when this call took the unit back, 'already'
-- when the order was taken back before (or the gate was built after it was
-- cancelled, which counted it), 'missing' when there is no gate: build it
-- from the database and run this again; 'stale' when the gate is not of
-- the build given (a hand-back's: the rebuild since counted the unit).
local meta = KEYS[1]
local released = KEYS[2] -- order ids taken back
local order = ARGV[1]
local built = ARGV[2]    -- a hand-back's: the build its unit was taken in ('' for
                         -- a cancelled order, or a gate from before builds were recorded)

local m = redis.call('HMGET', meta, 'stock', 'built')
if not m[1] then
  return {'missing'}
end
if built and built ~= '' and m[2] ~= built then
  return {'stale'}
end
if redis.call('SADD', released, order) == 0 then
  return {'already'}
end
redis.call('HINCRBY', meta, 'taken', -1)
redis.call('HINCRBY', meta, 'moves', 1) -- units came in (see rebalance.go)
redis.call('HSET', meta, 'soldout', '')
return {'released'}
