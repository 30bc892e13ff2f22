-- Install a lua-async gate rebuilt from the database and the streams,
-- unless one exists already: concurrent rebuilders race here and the first
-- one wins. The rebuilt buyers were written to a temporary key first.
-- KEYS[1] item meta hash, KEYS[2] buyers hash, KEYS[3] the rebuilt buyers,
-- KEYS[4] released set
-- ARGV[1] stock, ARGV[2] taken, ARGV[3] starts, ARGV[4] ends (unix ms, 0 = none),
-- ARGV[5] queue epoch, ARGV[6..] ids of the item's cancelled orders, read
-- in the same database snapshot as sold (see seed.lua)
if redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('DEL', KEYS[3])
  return 0
end
if redis.call('EXISTS', KEYS[3]) == 1 then
  redis.call('RENAME', KEYS[3], KEYS[2])
  redis.call('PERSIST', KEYS[2])
else
  redis.call('DEL', KEYS[2])
end
redis.call('DEL', KEYS[4])
for i = 6, #ARGV, 1000 do
  redis.call('SADD', KEYS[4], unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
redis.call('HSET', KEYS[1], 'stock', ARGV[1], 'taken', ARGV[2], 'starts', ARGV[3], 'ends', ARGV[4], 'soldout', '', 'epoch', ARGV[5])
return 1
