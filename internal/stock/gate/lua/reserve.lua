-- Reserve one unit of an item for one buyer, atomically.
-- KEYS[1] item meta hash: stock, taken, starts, ends (unix ms, 0 = none),
--         soldout (the stock at which the database said sold out, or '')
-- KEYS[2] buyers hash: user id -> order id
-- KEYS[3] void marker of this attempt: set by a hand-back, so an attempt
--         whose caller gave up and that reaches Redis only after its
--         hand-back (a stalled connection delivers it late) takes nothing
-- ARGV[1] user id, ARGV[2] order id of this attempt, ARGV[3] now (unix ms)
-- Returns {status, order id, stock seen}. A rerun of the same attempt (go-redis retries
-- EVALSHA after a lost reply) finds its own order id and answers ok again.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return {'missing', '', ''}
end
if redis.call('EXISTS', KEYS[3]) == 1 then
  return {'void', '', ''}
end
local prev = redis.call('HGET', KEYS[2], ARGV[1])
if prev == ARGV[2] then
  return {'ok', prev, redis.call('HGET', KEYS[1], 'stock') or ''}
end
local m = redis.call('HMGET', KEYS[1], 'stock', 'taken', 'starts', 'ends', 'soldout')
local now = tonumber(ARGV[3])
local starts = tonumber(m[3]) or 0
local ends = tonumber(m[4]) or 0
if starts > 0 and now < starts then
  return {'not_started', '', ''}
end
if ends > 0 and now >= ends then
  return {'ended', '', ''}
end
if prev then
  return {'dup', prev, ''}
end
if m[5] == m[1] or (tonumber(m[2]) or 0) >= (tonumber(m[1]) or 0) then
  return {'sold_out', '', ''}
end
redis.call('HINCRBY', KEYS[1], 'taken', 1)
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
return {'ok', ARGV[2], m[1]}
