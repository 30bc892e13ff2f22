-- Repair an item's gate from the database, if it has not changed since the
-- snapshot the repair was computed from (a reconcile never overwrites what
-- orders did meanwhile; it reports "busy" and can be run again).
-- Replies {status}: 'repaired', 'changed' (since the snapshot), 'missing'.
local meta = KEYS[1]
local buyers = KEYS[2]
local stream = KEYS[3]   -- the item's order stream
local released = KEYS[4]
local taken_seen = ARGV[1]              -- as snapshotted
local buyers_seen = tonumber(ARGV[2])   -- HLEN as snapshotted
local queued_seen = tonumber(ARGV[3])   -- XLEN as snapshotted
local stock, taken = ARGV[4], ARGV[5]   -- to write
local n_set, n_remove = tonumber(ARGV[6]), tonumber(ARGV[7])
-- ARGV[8..]: n_set pairs (user, order id) of buyers to set, n_remove pairs
-- (user, order id) of buyers to remove if they still hold that order, then
-- the ids of the cancelled orders the new taken counts as returned (a
-- release of one of them after this changes nothing).
local first_pair = 8

if redis.call('EXISTS', meta) == 0 then
  return {'missing'}
end
if (redis.call('HGET', meta, 'taken') or '') ~= taken_seen
    or redis.call('HLEN', buyers) ~= buyers_seen
    or redis.call('XLEN', stream) ~= queued_seen then
  return {'changed'}
end
redis.call('HSET', meta, 'stock', stock, 'taken', taken, 'soldout', '')
local i = first_pair
for _ = 1, n_set do
  redis.call('HSET', buyers, ARGV[i], ARGV[i + 1])
  i = i + 2
end
for _ = 1, n_remove do
  if redis.call('HGET', buyers, ARGV[i]) == ARGV[i + 1] then
    redis.call('HDEL', buyers, ARGV[i])
  end
  i = i + 2
end
for j = i, #ARGV, 1000 do
  redis.call('SADD', released, unpack(ARGV, j, math.min(j + 999, #ARGV)))
end
return {'repaired'}
