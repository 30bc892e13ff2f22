-- room_meta and ticket_status are shared by join.lua and status.lua
-- (scripts.go puts them in front of both). A ticket's serve number is its place in the admission
-- order: a pre-queue ticket's comes from the draw (the rank string holds
-- it, 4 bytes big-endian per ticket), every later ticket's is its own
-- number, since the pre-queue holds tickets 1..pre exactly. Tickets whose
-- serve number is at most head have been admitted.

local function u32(s, i)
  local a, b, c, d = string.byte(s, i, i + 3)
  return ((a * 256 + b) * 256 + c) * 256 + d
end

-- The room's fields ticket_status reads: {phase, closed, pre, head, rate,
-- seq, commitment}; phase is nil without a room. The commitment names the
-- line (a pass carries it): the callers append it to every status reply.
local function room_meta(meta)
  return redis.call('HMGET', meta, 'phase', 'closed', 'pre', 'head', 'rate', 'seq', 'commitment')
end

-- Reply: {state, position, user, pass expiry ms, rate, waiting, drawn}.
-- m is room_meta's answer. Answering admitted hands the pass to the page,
-- so the ticket's claim is met (claim); a deferred ticket (deferred) is
-- next: it waits at position 1 (seen.go).
local function ticket_status(m, tickets, rank, live, used, ticket, now_ms, deferred, claim)
  local phase = m[1]
  if not phase then return {'noroom'} end
  local closed = m[2] == '1'
  local pre, head = tonumber(m[3]), tonumber(m[4])
  local rate, seq = tonumber(m[5]) or 0, tonumber(m[6])
  local waiting = seq - head

  local user = redis.call('HGET', tickets, ticket)
  if not user then return {'unknown'} end
  if redis.call('SISMEMBER', used, ticket) == 1 then
    return {'used', 0, user, 0, rate, waiting, 1}
  end

  local t = tonumber(ticket)
  local serve = 0 -- 0: in the pre-queue, not drawn yet
  if phase == 'open' then
    if t <= pre then serve = u32(redis.call('GETRANGE', rank, 4 * (t - 1), 4 * t - 1), 1) else serve = t end
  elseif phase == 'opening' and t > pre then
    serve = t
  end
  if serve > 0 and serve <= head then
    local expiry = redis.call('ZSCORE', live, ticket)
    if expiry and tonumber(expiry) > now_ms then
      if closed then return {'sold_out', 0, user, 0, rate, waiting, 1} end
      redis.call('ZREM', claim, ticket)
      return {'admitted', 0, user, tonumber(expiry), rate, waiting, 1}
    end
    if redis.call('ZSCORE', deferred, ticket) then
      if closed then return {'sold_out', 0, user, 0, rate, waiting, 1} end
      return {'waiting', 1, user, 0, rate, waiting, 1}
    end
    return {'expired', 0, user, 0, rate, waiting, 1}
  end
  if closed then return {'sold_out', 0, user, 0, rate, waiting, serve > 0 and 1 or 0} end
  if serve == 0 then return {'waiting', 0, user, 0, rate, waiting, 0} end
  return {'waiting', serve - head, user, 0, rate, waiting, 1}
end
