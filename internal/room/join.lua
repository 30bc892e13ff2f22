-- Joins user to the room: one place per user, so a second join answers the
-- first ticket. Before the opening the ticket lands in the pre-queue (to be
-- drawn), after it at the end of the line.
local meta, tickets, rank, live, used, users = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local user = ARGV[1]
local now_ms = tonumber(ARGV[2])

if redis.call('EXISTS', meta) == 0 then return {'noroom'} end
if redis.call('HGET', meta, 'closed') == '1' then return {'sold_out'} end
local ticket = redis.call('HGET', users, user)
if not ticket then
  ticket = redis.call('HINCRBY', meta, 'seq', 1)
  redis.call('HSET', users, user, ticket)
  redis.call('HSET', tickets, ticket, user)
end
local st = ticket_status(meta, tickets, rank, live, used, ticket, now_ms)
table.insert(st, tonumber(ticket))
return st
