-- Take units out of a bucket to move them to another bucket of the same
-- item (the first of a move's two steps; moveout.lua and movein.lua run in
-- different slots). Half the bucket's free units (at least one) leave, and
-- the move is recorded in the bucket's out hash in the same step, so a
-- crash before movein.lua loses nothing: whoever reads the record (a buyer
-- that finds the item empty, the sweeper) finishes the move. A rerun of
-- the same move id answers the record again.
-- Replies {status, record}: 'ok' with "to units unix-ms built" (built: the
-- gate's build, see movein.lua), 'empty' (no free unit), 'missing' (no
-- gate).
local meta = KEYS[1]
local out = KEYS[2]       -- move id -> "to units unix-ms", until movein.lua applied it
local id = ARGV[1]        -- the move's id (random)
local to = ARGV[2]        -- the receiving bucket's number
local now = ARGV[3]       -- unix ms

local prev = redis.call('HGET', out, id)
if prev then
  return {'ok', prev}
end
if redis.call('EXISTS', meta) == 0 then
  return {'missing', ''}
end
local m = redis.call('HMGET', meta, 'stock', 'taken', 'soldout', 'built')
-- A bucket marked sold out by the database (see handback.lua) has nothing
-- to give.
if m[3] == m[1] then
  return {'empty', ''}
end
local free = (tonumber(m[1]) or 0) - (tonumber(m[2]) or 0)
if free <= 0 then
  return {'empty', ''}
end
local units = math.floor((free + 1) / 2)
redis.call('HINCRBY', meta, 'stock', -units)
local record = to .. ' ' .. units .. ' ' .. now
if m[4] and m[4] ~= '' then
  record = record .. ' ' .. m[4]
end
redis.call('HSET', out, id, record)
return {'ok', record}
