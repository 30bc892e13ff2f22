-- lua-async: admit one order and queue it for the database writers, all at
-- once: the idempotency key, the sale window, the buyer, what is left, then
-- XADD to the item's stream. Nothing is written unless every check passes.
-- KEYS[1] item meta hash (stock, taken, starts, ends, soldout, epoch: the
--         queue epoch each entry carries, see migrations/*/00004)
-- KEYS[2] buyers hash: user id -> order id
-- KEYS[3] the item's order stream
-- KEYS[4] the order's pending marker (found by order id until persisted)
-- KEYS[5] optional: the Idempotency-Key, "user|order id"
-- ARGV[1] user id, ARGV[2] order id (made before the script, so a rerun
-- after a lost reply finds its own order), ARGV[3] now (unix ms),
-- ARGV[4] item id, ARGV[5] idempotency key ('' = none),
-- ARGV[6] idempotency TTL (s), ARGV[7] marker TTL (s)
-- Returns {status, order id}.
if KEYS[5] then
  local prev = redis.call('GET', KEYS[5])
  if prev then
    local sep = string.find(prev, '|', 1, true)
    if not sep or string.sub(prev, 1, sep - 1) ~= ARGV[1] then
      return {'conflict', ''}
    end
    local oid = string.sub(prev, sep + 1)
    if oid == ARGV[2] then
      return {'ok', oid}
    end
    if oid ~= '' then
      return {'replay', oid}
    end
  end
end
local m = redis.call('HMGET', KEYS[1], 'stock', 'taken', 'starts', 'ends', 'soldout', 'epoch')
if not m[1] then
  return {'missing', ''}
end
local prev = redis.call('HGET', KEYS[2], ARGV[1])
if prev == ARGV[2] then
  return {'ok', prev}
end
local now = tonumber(ARGV[3])
local starts = tonumber(m[3]) or 0
local ends = tonumber(m[4]) or 0
if starts > 0 and now < starts then
  return {'not_started', ''}
end
if ends > 0 and now >= ends then
  return {'ended', ''}
end
if prev then
  return {'dup', prev}
end
if m[5] == m[1] or (tonumber(m[2]) or 0) >= (tonumber(m[1]) or 0) then
  return {'sold_out', ''}
end
redis.call('HINCRBY', KEYS[1], 'taken', 1)
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('XADD', KEYS[3], '*', 'o', ARGV[2], 'u', ARGV[1], 'k', ARGV[5], 't', ARGV[3], 'e', m[6] or '0')
redis.call('SET', KEYS[4], ARGV[4] .. '|' .. ARGV[1] .. '|' .. ARGV[3], 'EX', ARGV[7])
if KEYS[5] then
  redis.call('SET', KEYS[5], ARGV[1] .. '|' .. ARGV[2], 'EX', ARGV[6])
end
return {'ok', ARGV[2]}
