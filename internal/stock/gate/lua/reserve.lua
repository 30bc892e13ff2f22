-- Reserve one unit of an item for one buyer, atomically (admit.lua is the
-- prelude: refusal()).
-- Replies {status, order id, stock seen}: status 'ok', 'missing' (no gate:
-- build it and run this again), 'void', or a refusal() status. A rerun of
-- the same attempt (go-redis retries EVALSHA after a lost reply) finds its
-- own order id and answers ok again.
local meta = KEYS[1]    -- item meta hash: stock, taken, starts, ends (unix ms, 0 = none), soldout
local buyers = KEYS[2]  -- user id -> order id
local void = KEYS[3]    -- set by a hand-back of this attempt: an attempt whose caller gave
                        -- up and that reaches Redis only after its hand-back (a stalled
                        -- connection delivers it late) takes nothing
local user = ARGV[1]
local order = ARGV[2]   -- this attempt's order id
local now = tonumber(ARGV[3]) -- unix ms

local m = redis.call('HMGET', meta, 'stock', 'taken', 'starts', 'ends', 'soldout')
if not m[1] then -- a gate always has its stock
  return {'missing', '', ''}
end
if redis.call('EXISTS', void) == 1 then
  return {'void', '', ''}
end
local prev = redis.call('HGET', buyers, user)
if prev == order then
  return {'ok', prev, m[1]}
end
local why = refusal(m, prev, now)
if why == 'dup' then
  return {'dup', prev, ''}
elseif why then
  return {why, '', ''}
end
redis.call('HINCRBY', meta, 'taken', 1)
redis.call('HSET', buyers, user, order)
return {'ok', order, m[1]}
