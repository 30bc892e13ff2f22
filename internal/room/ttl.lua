-- Sets the lifetime of the passes admitted from now on.
local meta = KEYS[1]
if redis.call('EXISTS', meta) == 0 then return 'noroom' end
redis.call('HSET', meta, 'ttl', ARGV[1])
return 'ok'
