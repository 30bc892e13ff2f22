-- The last step of a hand-back whose unit went back to another bucket (see
-- handbackhome.lua): drop the buyer entry, if it is still this attempt's.
-- Replies {status}: 'dropped' or 'kept'.
local buyers = KEYS[1]
local user = ARGV[1]
local order = ARGV[2]

if redis.call('HGET', buyers, user) ~= order then
  return {'kept'}
end
redis.call('HDEL', buyers, user)
return {'dropped'}
