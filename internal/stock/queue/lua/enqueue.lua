-- lua-async: admit one order and queue it for the database writers, all at
-- once: the idempotency key, then the gate's checks (refusal(), from the
-- gate's admit.lua, concatenated in front of this script), then XADD to the
-- item's stream. Nothing is written unless every check passes.
-- Stream fields: see entry.go (FieldOrder, FieldUser, FieldKey, FieldTime,
-- FieldEpoch); change both together.
-- Replies {status, order id}: 'ok', 'replay' (the key names that order),
-- 'conflict', 'missing' (no gate: build it and run this again), 'room'
-- (the item has a waiting room and the order no verified pass), or a
-- refusal() status.
local meta = KEYS[1]    -- stock, taken, starts, ends, soldout, epoch (the queue epoch
                        -- each entry carries, see migrations/*/00004), room (the
                        -- item's waiting room is on, see gate/room.go)
local buyers = KEYS[2]  -- user id -> order id
local stream = KEYS[3]  -- the item's order stream
local marker = KEYS[4]  -- the queued order's marker, in the item's slot (see Keys.Queued)
-- KEYS[5], KEYS[6]: the optional keys, in this order, each given only when
-- its ARGV flag says so.
local user = ARGV[1]
local order = ARGV[2]   -- made before the script, so a rerun after a lost reply finds its own order
local now = ARGV[3]     -- unix ms
local key = ARGV[4]     -- '' = none
local idem_ttl = ARGV[5]   -- seconds
local marker_ttl = ARGV[6] -- seconds
local item = ARGV[7]       -- the item id, the index's value
local pass = ARGV[10]      -- '1': the order carries a pass the caller verified
local idem, index
local n = 5
if ARGV[8] == '1' then     -- the Idempotency-Key, "user|order id"
  idem = KEYS[n]
  n = n + 1
end
if ARGV[9] == '1' then     -- the order's index (Keys.OrderIndex): outside the item's
  index = KEYS[n]          -- slot, so given only on a single Redis; on a Cluster the
end                        -- caller sets it after this script

if idem then
  local held = redis.call('GET', idem)
  if held then
    local sep = string.find(held, '|', 1, true)
    if not sep or string.sub(held, 1, sep - 1) ~= user then
      return {'conflict', ''}
    end
    local oid = string.sub(held, sep + 1)
    if oid == order then
      return {'ok', oid}
    end
    if oid ~= '' then
      return {'replay', oid}
    end
  end
end
local m = redis.call('HMGET', meta, 'stock', 'taken', 'starts', 'ends', 'soldout', 'epoch', 'room')
if not m[1] then
  return {'missing', ''}
end
local prev = redis.call('HGET', buyers, user)
if prev == order then
  return {'ok', prev}
end
if m[7] and pass ~= '1' then
  return {'room', ''}
end
local why = refusal(m, prev, tonumber(now))
if why == 'dup' then
  return {'dup', prev}
elseif why then
  return {why, ''}
end
redis.call('HINCRBY', meta, 'taken', 1)
redis.call('HSET', buyers, user, order)
redis.call('XADD', stream, '*', 'o', order, 'u', user, 'k', key, 't', now, 'e', m[6] or '0')
redis.call('SET', marker, user .. '|' .. now .. '|' .. key, 'EX', marker_ttl)
if index then
  redis.call('SET', index, item, 'EX', marker_ttl)
end
if idem then
  redis.call('SET', idem, user .. '|' .. order, 'EX', idem_ttl)
end
return {'ok', order}
