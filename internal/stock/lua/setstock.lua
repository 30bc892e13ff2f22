-- Set an item's stock in the gate (absolute, so repeating it is harmless)
-- and clear the sold-out mark; the database sets it again if still true.
-- A missing gate is left missing: the next order rebuilds it from the database.
-- KEYS[1] item meta hash; ARGV[1] stock
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
redis.call('HSET', KEYS[1], 'stock', ARGV[1], 'soldout', '')
return 1
