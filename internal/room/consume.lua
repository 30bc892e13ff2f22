-- Marks a live pass used (its order was taken): it is never live again,
-- and its slot among the max_unused passes is free once the caller's
-- count of the remaining stock has seen the order: it stays in `spent`,
-- stamped with this node's clock (TIME), and Admit counts it against a
-- mark taken before a count that may not show it (admit.lua).
local meta, live, used, spent, tickets = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local ticket = ARGV[1]
local now_ms = tonumber(ARGV[2])
local user = ARGV[3] -- '': any holder; else the ticket must be this user's

if redis.call('EXISTS', meta) == 0 then return 'noroom' end
-- A pass of a line since dropped (the room turned off and on) names a
-- number that may be another user's in this line: not its holder's, so
-- not live for it.
if user ~= '' and redis.call('HGET', tickets, ticket) ~= user then return 'notlive' end
local expiry = redis.call('ZSCORE', live, ticket)
if not expiry then
  if redis.call('SISMEMBER', used, ticket) == 1 then return 'used' end
  return 'notlive'
end
if tonumber(expiry) <= now_ms then return 'notlive' end
local t = redis.call('TIME')
redis.call('ZREM', live, ticket)
redis.call('ZADD', spent, tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000), ticket)
redis.call('SADD', used, ticket)
redis.call('HINCRBY', meta, 'used', 1)
return 'ok'
