-- Announce that units of an item became available again (a stock change, a
-- cancelled order's unit returned): number the event and publish it, in
-- one step, so the numbers reach every subscriber in order.
-- Replies {'ok', the event's number}.
local counter = KEYS[1] -- the item's restock counter
local channel = ARGV[1] -- the events channel
local item = ARGV[2]    -- item id

local n = redis.call('INCR', counter)
redis.call('PUBLISH', channel, 'restock ' .. item .. ' ' .. n)
return {'ok', n}
