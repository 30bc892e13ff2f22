-- Set an item's stock in the gate (absolute, so repeating it is harmless)
-- and clear the sold-out mark; the database sets it again if still true.
-- It runs while the database holds the item's row lock (see the shop's
-- Service.SetStock), so stock changes reach the gate in commit order. A
-- missing gate is left missing: the next order builds it from the database.
-- Replies {status}: 'set', 'missing' (no gate), 'refused'.
local meta = KEYS[1]
local stock = ARGV[1]
local strict = ARGV[2] == '1' -- refuse a stock below what the gate has taken (lua-async:
                              -- taken counts queued orders, already promised to their buyers)

if redis.call('EXISTS', meta) == 0 then
  return {'missing'}
end
if strict and (tonumber(redis.call('HGET', meta, 'taken')) or 0) > tonumber(stock) then
  return {'refused'}
end
redis.call('HSET', meta, 'stock', stock, 'soldout', '')
return {'set'}
