-- Add the units of a move to the receiving bucket (the second step; see
-- moveout.lua), once per move id however often it runs: any number of
-- processes may finish the same move.
-- Replies {status}: 'applied', 'already', 'missing' (no gate: the item is
-- rebuilt whole, which drops every move record), 'stale' (the move began
-- before a rebuild, which counted its units from the database: a mover
-- that held its record across the rebuild adds nothing).
local meta = KEYS[1]
local moved_in = KEYS[2]  -- ids of the moves this bucket received
local id = ARGV[1]
local units = ARGV[2]
local built = ARGV[3]     -- the build the move began in ('' for a record from before builds were recorded)

if redis.call('EXISTS', meta) == 0 then
  return {'missing'}
end
if built ~= '' and redis.call('HGET', meta, 'built') ~= built then
  return {'stale'}
end
if redis.call('SADD', moved_in, id) == 0 then
  return {'already'}
end
redis.call('HINCRBY', meta, 'stock', units)
redis.call('HINCRBY', meta, 'moves', 1) -- units came in (see rebalance.go)
redis.call('HSET', meta, 'soldout', '')
return {'applied'}
