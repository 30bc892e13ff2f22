-- Repair an item's gate from the database, if it has not changed since the
-- snapshot the repair was computed from (a reconcile never overwrites what
-- orders did meanwhile; it reports "busy" and can be run again).
-- KEYS[1] item meta hash, KEYS[2] buyers hash, KEYS[3] the item's order
-- stream, KEYS[4] released set
-- ARGV[1] taken as snapshotted, ARGV[2] buyers as snapshotted (HLEN),
-- ARGV[3] queued as snapshotted (XLEN), ARGV[4] stock, ARGV[5] taken,
-- ARGV[6] n, ARGV[7] m: then n pairs (user, order id) of buyers to set, m
-- pairs (user, order id) of buyers to remove if they still hold that
-- order, then the ids of the cancelled orders the new taken counts as
-- returned (a release of one of them after this changes nothing).
-- Returns 1 repaired, 0 changed since the snapshot, -1 no gate.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return -1
end
if (redis.call('HGET', KEYS[1], 'taken') or '') ~= ARGV[1]
    or redis.call('HLEN', KEYS[2]) ~= tonumber(ARGV[2])
    or redis.call('XLEN', KEYS[3]) ~= tonumber(ARGV[3]) then
  return 0
end
redis.call('HSET', KEYS[1], 'stock', ARGV[4], 'taken', ARGV[5], 'soldout', '')
local i = 8
for _ = 1, tonumber(ARGV[6]) do
  redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
  i = i + 2
end
for _ = 1, tonumber(ARGV[7]) do
  if redis.call('HGET', KEYS[2], ARGV[i]) == ARGV[i + 1] then
    redis.call('HDEL', KEYS[2], ARGV[i])
  end
  i = i + 2
end
for j = i, #ARGV, 1000 do
  redis.call('SADD', KEYS[4], unpack(ARGV, j, math.min(j + 999, #ARGV)))
end
return 1
