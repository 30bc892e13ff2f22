-- Renew a live writer's claim on the entries it still owns: reset their idle
-- time so the slow backstop (XAUTOCLAIM after ClaimIdle) leaves them alone.
-- Only entries the consumer owns are touched, so a renewal never takes an
-- entry back from a writer that claimed it meanwhile, and each entry keeps
-- its delivery count (RETRYCOUNT): a renewal is not a delivery (miniredis,
-- unlike Redis, counts XCLAIM JUSTID as one).
-- Replies {'ok', entries renewed}.
local stream = KEYS[1]
local group, consumer, count = ARGV[1], ARGV[2], ARGV[3]
local owned = redis.call('XPENDING', stream, group, '-', '+', count, consumer)
for _, p in ipairs(owned) do
  -- p = {id, consumer, idle ms, deliveries}
  redis.call('XCLAIM', stream, group, consumer, 0, p[1], 'RETRYCOUNT', p[4], 'JUSTID')
end
return {'ok', #owned}
