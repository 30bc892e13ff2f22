-- Hand a reservation back after its database write failed. Idempotent: only
-- the attempt that still owns the buyer entry returns the unit, once, and
-- never when the order id is in the released set already (a write that did
-- commit, despite its error, whose order was then cancelled and released).
-- KEYS[1] item meta hash, KEYS[2] buyers hash, KEYS[3] released set,
-- KEYS[4] the attempt's void marker (see reserve.lua): set whether or not
-- the attempt holds the unit, so if its reserve has not reached Redis yet
-- it never takes one.
-- ARGV[1] user id, ARGV[2] order id, ARGV[3] the gate's stock when the
-- database said the item is sold out ('' otherwise): the gate stops sending
-- buyers there until the stock changes. ARGV[4] the void marker's TTL (s).
-- Returns 1 when the unit went back to the gate, 0 otherwise.
redis.call('SET', KEYS[4], '1', 'EX', ARGV[4])
if redis.call('HGET', KEYS[2], ARGV[1]) ~= ARGV[2] then
  return 0
end
redis.call('HDEL', KEYS[2], ARGV[1])
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
local back = 0
if redis.call('SADD', KEYS[3], ARGV[2]) == 1 then
  redis.call('HINCRBY', KEYS[1], 'taken', -1)
  back = 1
end
if ARGV[3] ~= '' then
  redis.call('HSET', KEYS[1], 'soldout', ARGV[3])
end
return back
