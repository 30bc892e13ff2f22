-- Return a cancelled order's unit to the gate, once per order id.
-- KEYS[1] item meta hash, KEYS[2] released set (order ids taken back)
-- ARGV[1] order id
-- Returns 'released' when this call took the unit back, 'already' when the
-- order was taken back before (or the gate was rebuilt after it was
-- cancelled, which counted it), 'missing' when there is no gate: seed it
-- from the database and run this again.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 'missing'
end
if redis.call('SADD', KEYS[2], ARGV[1]) == 0 then
  return 'already'
end
redis.call('HINCRBY', KEYS[1], 'taken', -1)
redis.call('HSET', KEYS[1], 'soldout', '')
return 'released'
