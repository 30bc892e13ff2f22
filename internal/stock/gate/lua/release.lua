-- Return a cancelled order's unit to the gate, once per order id.
-- Replies {status}: 'released' when this call took the unit back, 'already'
-- when the order was taken back before (or the gate was built after it was
-- cancelled, which counted it), 'missing' when there is no gate: build it
-- from the database and run this again.
local meta = KEYS[1]
local released = KEYS[2] -- order ids taken back
local order = ARGV[1]

if redis.call('EXISTS', meta) == 0 then
  return {'missing'}
end
if redis.call('SADD', released, order) == 0 then
  return {'already'}
end
redis.call('HINCRBY', meta, 'taken', -1)
redis.call('HINCRBY', meta, 'moves', 1) -- units came in (see rebalance.go)
redis.call('HSET', meta, 'soldout', '')
return {'released'}
