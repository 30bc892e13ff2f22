-- A ticket's state and place: the poll of a waiting page.
local meta, tickets, rank, live, used, deferred, claim = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local ticket = ARGV[1]
local now_ms = tonumber(ARGV[2])

local m = room_meta(meta)
local st = ticket_status(m, tickets, rank, live, used, ticket, now_ms, deferred, claim)
table.insert(st, tonumber(ticket))
table.insert(st, m[7] or '')
return st
