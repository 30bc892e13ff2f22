-- Announce that units of an item became available again (a stock change, a
-- cancelled order's unit returned): number the event and publish it, in
-- one step, so the numbers reach every subscriber in order.
-- KEYS[1] the item's restock counter
-- ARGV[1] the events channel, ARGV[2] item id
-- Returns the event's number.
local n = redis.call('INCR', KEYS[1])
redis.call('PUBLISH', ARGV[1], 'restock ' .. ARGV[2] .. ' ' .. n)
return n
