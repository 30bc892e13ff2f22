-- Extend a held lock; never recreate one that expired, never shorten it (another
-- acquisition of the same owner may hold a longer lease).
-- KEYS[1] lock hash   ARGV[1] owner token   ARGV[2] attempt id   ARGV[3] ttl in ms ("0" = only report)
-- Returns the remaining ttl in ms (>= 0) when held, -1 expired, -2 held by another owner,
--         -3 this acquisition was released (the owner still holds others).
local owner = redis.call('HGET', KEYS[1], 'owner')
if owner == ARGV[1] then
  if redis.call('HEXISTS', KEYS[1], 'a:' .. ARGV[2]) == 0 then return -3 end
  local ttl = tonumber(ARGV[3])
  if ttl > 0 and redis.call('PTTL', KEYS[1]) < ttl then redis.call('PEXPIRE', KEYS[1], ttl) end
  return redis.call('PTTL', KEYS[1])
end
if owner then return -2 end
return -1
