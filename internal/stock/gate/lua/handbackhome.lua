-- The first step of a hand-back whose unit goes back to another bucket
-- than the buyer's (see Gate.HandBack): in the buyer's home bucket, mark
-- the attempt void and check that it still owns the buyer entry. The entry
-- stays until the unit is back (release.lua in the order's release bucket,
-- then dropbuyer.lua here): a hand-back cut short between the steps leaves
-- it, so the next one finishes the job, and the released set says whether
-- the unit came back already.
-- Replies {status, built}: 'owned' when the attempt owns the entry (the
-- caller releases the unit, then drops the entry), with the build of the
-- gate the unit is taken in ('' for a gate from before builds were
-- recorded); 'kept' otherwise. The release counts only in that build: a
-- rebuild since then has counted the unit free already (this void marker
-- is set before its install of this bucket, which sees it).
local meta = KEYS[1]
local buyers = KEYS[2]
local void = KEYS[3]        -- the attempt's void marker (see handback.lua)
local user = ARGV[1]
local order = ARGV[2]
local sold_out_at = ARGV[3] -- as in handback.lua
local void_ttl = ARGV[4]    -- seconds

redis.call('SET', void, '1', 'EX', void_ttl)
if redis.call('HGET', buyers, user) ~= order then
  return {'kept', ''}
end
if redis.call('EXISTS', meta) == 0 then
  redis.call('HDEL', buyers, user)
  return {'kept', ''}
end
local built = redis.call('HGET', meta, 'built')
if sold_out_at ~= '' then
  redis.call('HSET', meta, 'soldout', sold_out_at)
end
return {'owned', built or ''}
