-- Claim an idempotency key for a user, or report what became of it.
-- The value is "<user id>|<order id>", the order id empty until an order
-- placed under the key is known (user ids never contain '|').
-- KEYS[1] idempotency key; ARGV[1] user id, ARGV[2] TTL in seconds
-- Returns {'new'|'pending'|'done'|'conflict', order id}.
local v = redis.call('GET', KEYS[1])
if not v then
  redis.call('SET', KEYS[1], ARGV[1] .. '|', 'EX', ARGV[2])
  return {'new', ''}
end
local sep = string.find(v, '|', 1, true)
if not sep or string.sub(v, 1, sep - 1) ~= ARGV[1] then
  return {'conflict', ''}
end
local order = string.sub(v, sep + 1)
if order ~= '' then
  return {'done', order}
end
return {'pending', ''}
