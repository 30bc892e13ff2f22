-- Create an item's gate state from the database, unless it already exists:
-- concurrent rebuilders race here and the first one wins.
-- KEYS[1] item meta hash
-- ARGV[1] stock, ARGV[2] sold, ARGV[3] starts, ARGV[4] ends (unix ms, 0 = none)
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
redis.call('HSET', KEYS[1], 'stock', ARGV[1], 'taken', ARGV[2], 'starts', ARGV[3], 'ends', ARGV[4], 'soldout', '')
return 1
