-- Pauses admission (ARGV[1] = '1': nobody new is admitted, expired passes
-- still leave) or resumes it ('0'), for every instance at once.
local meta = KEYS[1]
if redis.call('EXISTS', meta) == 0 then return 'noroom' end
if ARGV[1] == '1' then
  redis.call('HSET', meta, 'paused', '1')
else
  redis.call('HDEL', meta, 'paused')
end
return 'ok'
