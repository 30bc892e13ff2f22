-- A fair waiter gives up: leave the queue, and wake the next waiter if the lock is free.
-- KEYS[1] lock hash   KEYS[2] fair queue   KEYS[3] fair deadlines
-- ARGV[1] attempt id   ARGV[2] wake channel
redis.call('LREM', KEYS[2], 0, ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
if redis.call('EXISTS', KEYS[1]) == 0 then
  local head = redis.call('LINDEX', KEYS[2], 0)
  if head then redis.call('PUBLISH', ARGV[2], head) end
end
return 1
