-- Closes the room as sold out (ARGV[1] = '1') or opens it again when stock
-- came back ('0'). A room opened again after a sell-out is marked resumed:
-- from then on its pages may have stopped polling (they were told the sale
-- was over), so admit.lua defers the tickets not seen lately.
local meta = KEYS[1]
local sold_out = ARGV[1]

if redis.call('EXISTS', meta) == 0 then return 'noroom' end
if sold_out == '1' then
  redis.call('HSET', meta, 'closed', '1')
elseif redis.call('HDEL', meta, 'closed') == 1 then
  redis.call('HSET', meta, 'resumed', '1')
end
return 'ok'
