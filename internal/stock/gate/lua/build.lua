-- Create an item's gate state from the database, unless it already exists:
-- concurrent rebuilders race here and the first one wins.
-- KEYS[1] item meta hash, KEYS[2] released set
-- ARGV[1] stock, ARGV[2] sold, ARGV[3] starts, ARGV[4] ends (unix ms, 0 = none),
-- ARGV[5..] ids of the item's cancelled orders, read in the same database
-- snapshot as sold: sold already left them out, so the gate counts them as
-- released and a later release of one of them changes nothing.
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
redis.call('DEL', KEYS[2])
for i = 5, #ARGV, 1000 do
  redis.call('SADD', KEYS[2], unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
redis.call('HSET', KEYS[1], 'stock', ARGV[1], 'taken', ARGV[2], 'starts', ARGV[3], 'ends', ARGV[4], 'soldout', '')
return 1
