-- Raise a lock's fence counter to at least the highest fence the guarded
-- resource has seen: FenceFloor's seed of a missing counter, and
-- Client.RaiseFence for one that lags. Set only when missing or lower, so
-- instances raising at once (each from its own read of the resource) can
-- only raise it.
-- KEYS[1] fence counter   ARGV[1] floor
-- Returns the counter after the call.
local fenceKey, floor = KEYS[1], tonumber(ARGV[1])
local current = tonumber(redis.call('GET', fenceKey) or '-1')
if current < floor then
  redis.call('SET', fenceKey, floor)
  return floor
end
return current
