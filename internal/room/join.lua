-- Joins users to the room, in order: one place per user, so a user who
-- joined before (or earlier in this call) gets the ticket they hold. Before
-- the opening a ticket lands in the pre-queue (to be drawn), after it at
-- the end of the line. One call carries the joins that arrived together
-- (Room.JoinMany): one round trip and one script run for all of them.
local meta, tickets, rank, live, used, users = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local now_ms = tonumber(ARGV[1])
-- ARGV[2..]: the users.

-- Reply: one entry per user, in order: ticket_status's reply and the
-- ticket, or {'noroom'} / {'sold_out'} for every user when the room is
-- missing or closed.
local refusal
if redis.call('EXISTS', meta) == 0 then
  refusal = 'noroom'
elseif redis.call('HGET', meta, 'closed') == '1' then
  refusal = 'sold_out'
end
local out = {}
for i = 2, #ARGV do
  if refusal then
    out[i - 1] = {refusal}
  else
    local user = ARGV[i]
    local ticket = redis.call('HGET', users, user)
    if not ticket then
      ticket = redis.call('HINCRBY', meta, 'seq', 1)
      redis.call('HSET', users, user, ticket)
      redis.call('HSET', tickets, ticket, user)
    end
    local st = ticket_status(meta, tickets, rank, live, used, ticket, now_ms)
    table.insert(st, tonumber(ticket))
    out[i - 1] = st
  end
end
return out
