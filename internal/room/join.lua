-- Joins users to the room, in order: one place per user, so a user who
-- joined before (or earlier in this call) gets the ticket they hold. Before
-- the opening a ticket lands in the pre-queue (to be drawn), after it at
-- the end of the line. One call carries the joins that arrived together
-- (Room.JoinMany): one round trip and one script run for all of them.
local meta, tickets, rank, live, used, users, deferred, claim = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local now_ms = tonumber(ARGV[1])
-- ARGV[2]: the most tickets the room may hold (0: no bound); a user who
-- has a ticket gets it back past it, a new one gets 'full'.
local max_tickets = tonumber(ARGV[2]) or 0
-- ARGV[3..]: the users.

-- Reply: {{drawn, head, rate, commitment}, entries}, an entry per user in
-- order: a new ticket's number alone (its status follows from it and the
-- header: see below), 'full' (no new ticket: the room holds max_tickets), or else
-- ticket_status's reply, the ticket and the commitment. A missing or
-- closed room: 'noroom' or 'sold_out' alone, for all.
local m = room_meta(meta)
if not m[1] then return 'noroom' end
if m[2] == '1' then return 'sold_out' end
local out = {}

-- The one trick: a new ticket's status needs no reads. Its number t is
-- past every admitted serve number (admission stops at seq), and past the
-- pre-queue once the opening froze it: before the opening it waits
-- undrawn, after it it waits at its own number (position t - head), and
-- t - head tickets wait when it is taken. So new tickets are counted here
-- and written together at the end (HSET takes many fields); a user met
-- again in this call finds theirs in fresh.
local phase, head, rate = m[1], tonumber(m[4]), tonumber(m[5]) or 0
local drawn = 1
if phase == 'pre' then drawn = 0 end
local seq = tonumber(m[6])
local fresh, new_users, new_tickets = {}, {}, {}
local function write()
  if #new_users == 0 then return end
  redis.call('HSET', meta, 'seq', seq)
  redis.call('HSET', users, unpack(new_users))
  redis.call('HSET', tickets, unpack(new_tickets))
  new_users, new_tickets = {}, {}
end
-- Every user's ticket from before this call, in a few HMGETs (false: none).
local had = {}
for from = 3, #ARGV, 500 do
  local got = redis.call('HMGET', users, unpack(ARGV, from, math.min(from + 499, #ARGV)))
  for k = 1, #got do had[from + k - 1] = got[k] end
end
for i = 3, #ARGV do
  local user = ARGV[i]
  local t, old = fresh[user], had[i] -- at most one is set
  if t then
    -- Named again in this call: as ticket_status would answer it (more
    -- tickets wait now than when it was taken).
    out[i - 2] = {'waiting', drawn * (t - head), user, 0, rate, seq - head, drawn, t, m[7]}
  elseif not old and max_tickets > 0 and seq >= max_tickets then
    -- The bound on a room's tickets (and so its Redis memory), checked
    -- here with the count it guards: no two joins pass it together.
    out[i - 2] = 'full'
  elseif not old then
    seq = seq + 1
    fresh[user] = seq
    local n = #new_users
    new_users[n + 1], new_users[n + 2] = user, seq
    new_tickets[n + 1], new_tickets[n + 2] = seq, user
    if n + 2 >= 1000 then write() end -- unpack's bound
    out[i - 2] = seq
  else
    m[6] = seq
    local st = ticket_status(m, tickets, rank, live, used, old, now_ms, deferred, claim)
    table.insert(st, tonumber(old))
    table.insert(st, m[7])
    out[i - 2] = st
  end
end
write()
return {{drawn, head, rate, m[7]}, out}
