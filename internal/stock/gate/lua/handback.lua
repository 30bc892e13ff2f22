-- Hand a reservation back after its database write failed. Idempotent: only
-- the attempt that still owns the buyer entry returns the unit, once, and
-- never when the order id is in the released set already (a write that did
-- commit, despite its error, whose order was then cancelled and released).
-- The released set is that of the order's release bucket (ReleaseBucket):
-- this script runs when it is the buyer's home bucket; otherwise
-- Gate.HandBack runs handbackhome.lua, release.lua and dropbuyer.lua.
-- Replies {status}: 'back' when the unit went back to the gate, 'kept'
-- otherwise.
local meta = KEYS[1]
local buyers = KEYS[2]
local released = KEYS[3]
local void = KEYS[4]        -- the attempt's void marker (see reserve.lua): set whether or
                            -- not the attempt holds the unit, so if its reserve has not
                            -- reached Redis yet it never takes one
local user = ARGV[1]
local order = ARGV[2]
local sold_out_at = ARGV[3] -- the gate's stock when the database said sold out ('' otherwise):
                            -- the gate stops sending buyers there until the stock changes
local void_ttl = ARGV[4]    -- seconds

redis.call('SET', void, '1', 'EX', void_ttl)
if redis.call('HGET', buyers, user) ~= order then
  return {'kept'}
end
redis.call('HDEL', buyers, user)
if redis.call('EXISTS', meta) == 0 then
  return {'kept'}
end
local status = 'kept'
if redis.call('SADD', released, order) == 1 then
  redis.call('HINCRBY', meta, 'taken', -1)
  redis.call('HINCRBY', meta, 'moves', 1) -- units came in (see rebalance.go)
  status = 'back'
end
if sold_out_at ~= '' then
  redis.call('HSET', meta, 'soldout', sold_out_at)
end
return {status}
