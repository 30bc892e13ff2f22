-- Mark a lua-async item's gate with its waiting room, or clear the mark
-- (see room.go). Only a gate that exists is marked: a missing one is built
-- from the database, which restores the mark (rebuild.lua), and a meta
-- holding the mark alone would pass for a gate.
-- Replies {status}: 'marked', or 'missing' (no gate: nothing to mark).
local meta = KEYS[1]
local roomed = ARGV[1] -- '1': the item has a waiting room; '': it has none

if redis.call('HEXISTS', meta, 'stock') == 0 then
  return {'missing'}
end
if roomed == '1' then
  redis.call('HSET', meta, 'room', '1')
else
  redis.call('HDEL', meta, 'room')
end
return {'marked'}
