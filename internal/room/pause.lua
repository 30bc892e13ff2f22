-- Sets the room's admission controls for every instance at once:
-- ARGV[1] '1' pauses admission (nobody new is admitted, expired passes
-- still leave), '0' resumes it; ARGV[2] > 0 caps the admissions a second
-- whatever rate a caller passes (0: no cap).
local meta = KEYS[1]
if redis.call('EXISTS', meta) == 0 then return 'noroom' end
if ARGV[1] == '1' then
  redis.call('HSET', meta, 'paused', '1')
else
  redis.call('HDEL', meta, 'paused')
end
if tonumber(ARGV[2]) > 0 then
  redis.call('HSET', meta, 'rate_cap', ARGV[2])
else
  redis.call('HDEL', meta, 'rate_cap')
end
return 'ok'
