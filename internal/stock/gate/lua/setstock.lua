-- Set an item's stock in the gate (absolute, so repeating it is harmless)
-- and clear the sold-out mark; the database sets it again if still true.
-- It runs while the database holds the item's row lock (see
-- Service.SetStock), so stock changes reach the gate in commit order.
-- A missing gate is left missing: the next order rebuilds it from the database.
-- KEYS[1] item meta hash
-- ARGV[1] stock
-- ARGV[2] '1' to refuse a stock below what the gate has taken (lua-async:
-- taken counts queued orders, already promised to their buyers)
-- Returns 1 set, 0 no gate, -1 refused.
local meta = KEYS[1]
local stock = ARGV[1]
local strict = ARGV[2] == '1'
if redis.call('EXISTS', meta) == 0 then
  return 0
end
if strict and (tonumber(redis.call('HGET', meta, 'taken')) or 0) > tonumber(stock) then
  return -1
end
redis.call('HSET', meta, 'stock', stock, 'soldout', '')
return 1
