-- Claim an idempotency key for a user, or report who claimed it first.
-- KEYS[1] idempotency key; ARGV[1] user id, ARGV[2] TTL in seconds
local owner = redis.call('GET', KEYS[1])
if owner then
  return owner
end
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
return ARGV[1]
