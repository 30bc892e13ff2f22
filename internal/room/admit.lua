-- Admits the next users in line, all instances together:
--   * expired unused passes leave the live set first, so their slots pass
--     to the next in line (no-show compensation);
--   * at most max_unused passes are live (admitted, not used, not expired)
--     or spent at or after mark_ms. Both clocks are this node's (TIME):
--     consume.lua stamps a spent pass with it, and the caller took mark_ms
--     (Mark) before it read the remaining stock it derived max_unused
--     from. An order is taken before its pass is spent, so a pass spent
--     before the mark is in that figure, and its slot is free; one spent
--     since may not be, and still holds its slot;
--   * spent entries are kept grace_ms by this node's clock (either way: an
--     entry further ahead was stamped by a node whose clock ran ahead, a
--     failover's), and a mark older than that (a caller that took longer
--     from its mark to here) admits nobody: the entries it must count may
--     be gone. A mark ahead of this node's clock (taken on another node)
--     counts from this node's now;
--   * at most per_call in one call, so one script never blocks Redis long;
--   * nobody before hold_ms (HoldAdmission: a room set up again after a
--     Redis loss, while the passes issued before it may still be live);
--   * nobody while paused, and at most the rate cap a second (SetControl),
--     whatever the caller knows of them;
--   * at most rate admissions per second of the callers' clock. The trick:
--     by the ms-th millisecond of a second at most ceil(rate*(ms+1)/1000)
--     may have been admitted in it, so the rate is spread over the second
--     and one second never exceeds it. The window only moves forward: a
--     caller whose clock is behind counts as at the current second's
--     first millisecond, so a lagging clock adds no burst.
--   * the admission clock only moves forward too: a pass expires TTL after
--     the later of the caller's clock and the last admission's time, so
--     passes expire, and read as admitted, in the line's order whatever
--     the callers' clocks say (adm_ms).
--   * a ticket seen lately but not very lately is deferred, and an
--     admitted ticket whose pass its page did not read within claim_ms
--     lapses and is deferred (seen.go);
local meta, live, draw, spent, seen_cur, seen_prev = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local deferred, claim, short_cur, short_prev, used = KEYS[7], KEYS[8], KEYS[9], KEYS[10], KEYS[11]
local now_ms = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local max_unused = tonumber(ARGV[3])
local per_call = tonumber(ARGV[4])
local grace_ms = tonumber(ARGV[5])
local lead_ms = tonumber(ARGV[6]) or 0
local mark_ms = tonumber(ARGV[7])
local seen_ms = tonumber(ARGV[8]) or 0
local skip_cap = tonumber(ARGV[9]) or 0
local short_ms = tonumber(ARGV[10]) or 0
local claim_ms = tonumber(ARGV[11]) or 0

local m = redis.call('HMGET', meta, 'phase', 'closed', 'pre', 'head', 'seq', 'ttl', 'win', 'win_n', 'paused', 'rate_cap', 'adm_ms', 'hold_ms', 'seen_since', 'seen_short_since', 'resumed')
local phase = m[1]
if not phase then return {'noroom', 0, 0, {}} end
local expired = redis.call('ZREMRANGEBYSCORE', live, '-inf', now_ms)
if expired > 0 then redis.call('HINCRBY', meta, 'expired', expired) end
-- Claims past their deadline: a pass its page did not read lapses (it
-- leaves the live set) and its ticket is deferred. A used pass left the
-- live set when it bought, so it never lapses; one expired already reads
-- expired.
local unclaimed = 0
local lapsed = redis.call('ZRANGEBYSCORE', claim, '-inf', now_ms, 'LIMIT', 0, per_call)
for _, tk in ipairs(lapsed) do
  redis.call('ZREM', claim, tk)
  if redis.call('SISMEMBER', used, tk) == 0 and redis.call('ZREM', live, tk) == 1 then
    redis.call('ZADD', deferred, now_ms, tk)
    unclaimed = unclaimed + 1
  end
end
if unclaimed > 0 then redis.call('HINCRBY', meta, 'unclaimed', unclaimed) end
-- Reply: {code, expired, pass expiry, admitted, skipped, deferred,
-- unclaimed, head advance}.
local function reply(code, expiry, admitted, skipped, deferred_n, advance)
  return {code, expired, expiry, admitted, skipped, deferred_n, unclaimed, advance}
end
local t = redis.call('TIME')
local node_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', spent, '-inf', node_ms - grace_ms - 1)
redis.call('ZREMRANGEBYSCORE', spent, node_ms + grace_ms + 1, '+inf')
local cap = tonumber(m[10])
if cap and cap > 0 and cap < rate then rate = cap end
redis.call('HSET', meta, 'rate', rate)
if phase ~= 'open' then return reply('notopen', 0, {}, 0, 0, 0) end
if m[2] == '1' then return reply('sold_out', 0, {}, 0, 0, 0) end
if m[9] == '1' then return reply('ok', 0, {}, 0, 0, 0) end -- paused (SetControl)
if m[12] and now_ms < tonumber(m[12]) then return reply('ok', 0, {}, 0, 0, 0) end -- HoldAdmission
if mark_ms < node_ms - grace_ms then return reply('stale', 0, {}, 0, 0, 0) end
if mark_ms > node_ms then mark_ms = node_ms end

local pre, head, seq, ttl = tonumber(m[3]), tonumber(m[4]), tonumber(m[5]), tonumber(m[6])
local sec = math.floor(now_ms / 1000)
local win, win_n = tonumber(m[7]) or -1, tonumber(m[8]) or 0
local ms = now_ms - sec * 1000
if sec > win then
  win, win_n = sec, 0
elseif sec < win then
  ms = 0
end
-- lead_ms: the caller calls again that much later, so admit what falls
-- due before then too; never past the second's rate.
local allowed = math.ceil(rate * math.min(1000, ms + 1 + lead_ms) / 1000)
local held = redis.call('ZCARD', live) + redis.call('ZCOUNT', spent, mark_ms, '+inf')
-- The deferred tickets wait too (ahead of the line).
local aside = redis.call('ZCARD', deferred)
local n = math.min(allowed - win_n, max_unused - held, seq - head + aside, per_call)
if n <= 0 then return reply('ok', 0, {}, 0, 0, 0) end

local function u32(s, i)
  local a, b, c, d = string.byte(s, i, i + 3)
  return ((a * 256 + b) * 256 + c) * 256 + d
end
-- Serve numbers from head+1: the pre-queue's tickets from the draw, then
-- each ticket is its own serve number. A waiting ticket seen in neither
-- long seen window is passed over (it reads expired: seen.go), once the
-- seen bitmaps have been kept two windows. One seen in neither short
-- window is deferred (seen.go), once the short bitmaps have been kept two
-- short windows; the deferred go first, oldest first, once seen in a
-- short window again, and are passed over once unseen in the long windows
-- (once those are kept two windows).
local since, short_since = tonumber(m[13]), tonumber(m[14])
local skipping = seen_ms > 0 and since ~= nil and now_ms - since >= 2 * seen_ms
-- Only in a room that sold out and came back (close.lua): until then the
-- line is served in order, a page's late poll costs it nothing, and an
-- absent page's pass simply expires.
local deferring = m[15] == '1' and short_ms > 0 and short_since ~= nil and now_ms - short_since >= 2 * short_ms
local function seen(a, b, t) return redis.call('GETBIT', a, t) == 1 or redis.call('GETBIT', b, t) == 1 end
local adm_ms = math.max(now_ms, tonumber(m[11]) or 0)
local expiry = adm_ms + ttl
local admitted, skipped, deferred_n = {}, 0, 0
local function admit(t)
  redis.call('ZADD', live, expiry, t)
  if deferring then
    -- Claimed within claim_ms, or deferred: seen in a short window again
    -- means polled since this admission. (A bit is cleared only where it
    -- is set: SETBIT on a missing key would make one with no expiry.)
    redis.call('ZADD', claim, now_ms + claim_ms, t)
    for _, w in ipairs({short_cur, short_prev}) do
      if redis.call('GETBIT', w, t) == 1 then redis.call('SETBIT', w, t, 0) end
    end
  end
  admitted[#admitted + 1] = tonumber(t)
end
if aside > 0 then
  for _, tk in ipairs(redis.call('ZRANGE', deferred, 0, math.min(aside, n + 1000) - 1)) do
    if #admitted >= n then break end
    if redis.call('SISMEMBER', used, tk) == 1 then
      redis.call('ZREM', deferred, tk)
    elseif not deferring or seen(short_cur, short_prev, tk) then
      redis.call('ZREM', deferred, tk)
      admit(tk)
    elseif skipping and not seen(seen_cur, seen_prev, tk) then
      redis.call('ZREM', deferred, tk)
      skipped = skipped + 1
    end
  end
end
local serve = head
while #admitted < n and serve < seq do
  serve = serve + 1
  local ticket = serve
  if serve <= pre then ticket = u32(redis.call('GETRANGE', draw, 4 * (serve - 1), 4 * serve - 1), 1) end
  local bounded = skipped + deferred_n < skip_cap
  if skipping and bounded and not seen(seen_cur, seen_prev, ticket) then
    skipped = skipped + 1
  elseif deferring and bounded and not seen(short_cur, short_prev, ticket) then
    redis.call('ZADD', deferred, now_ms, ticket)
    deferred_n = deferred_n + 1
  else
    admit(ticket)
  end
end
local k = #admitted
redis.call('HSET', meta, 'head', serve, 'win', win, 'win_n', win_n + k, 'adm_ms', adm_ms)
if k > 0 then redis.call('HINCRBY', meta, 'admitted', k) end
if skipped > 0 then redis.call('HINCRBY', meta, 'skipped', skipped) end
if deferred_n > 0 then redis.call('HINCRBY', meta, 'deferred', deferred_n) end
if k == 0 then expiry = 0 end
return reply('ok', expiry, admitted, skipped, deferred_n, serve - head)
