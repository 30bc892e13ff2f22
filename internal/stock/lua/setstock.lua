-- Set an item's stock in the gate (absolute, so repeating it is harmless)
-- and clear the sold-out mark; the database sets it again if still true.
-- A missing gate is left missing: the next order rebuilds it from the database.
-- KEYS[1] item meta hash; ARGV[1] stock; ARGV[2] '1' to refuse a stock
-- below what the gate has taken (lua-async: taken counts queued orders,
-- already promised to their buyers)
-- Returns 1 set, 0 no gate, -1 refused.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
if ARGV[2] == '1' and (tonumber(redis.call('HGET', KEYS[1], 'taken')) or 0) > tonumber(ARGV[1]) then
  return -1
end
redis.call('HSET', KEYS[1], 'stock', ARGV[1], 'soldout', '')
return 1
