-- First step of the opening: closes the pre-queue. Tickets 1..seq are the
-- pre-queue; every later join is served in arrival order after them. A
-- seed that does not match the commitment changes nothing. The reply
-- carries the pre-queue's size and the set-up's epoch (its tickets'
-- strings name it).
local meta = KEYS[1]
local commitment = ARGV[1]

local m = redis.call('HMGET', meta, 'phase', 'commitment', 'seq', 'pre', 'epoch')
local phase = m[1]
if not phase then return {'noroom', 0} end
if m[2] ~= commitment then return {'badseed', 0} end
if phase == 'pre' then
  redis.call('HSET', meta, 'phase', 'opening', 'pre', m[3])
  return {'opening', tonumber(m[3]), m[5] or ''}
end
return {phase, tonumber(m[4]), m[5] or ''}
