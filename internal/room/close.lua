-- Closes the room as sold out (ARGV[1] = '1') or opens it again when stock
-- came back ('0').
local meta = KEYS[1]
local sold_out = ARGV[1]

if redis.call('EXISTS', meta) == 0 then return 'noroom' end
if sold_out == '1' then
  redis.call('HSET', meta, 'closed', '1')
else
  redis.call('HDEL', meta, 'closed')
end
return 'ok'
