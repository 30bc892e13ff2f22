-- Obtain a lock, re-enter it, or recognise an earlier run of this same attempt.
-- KEYS[1] lock hash   {owner = token, first = fence of the holding, a:<id> = fence of each acquisition}
-- KEYS[2] fence counter (string, INCR; never expires so fences keep rising)
-- KEYS[3] fair queue (list of attempt ids)   KEYS[4] fair deadlines (zset attempt id -> ms)
-- ARGV[1] owner token   ARGV[2] attempt id   ARGV[3] ttl in ms
-- ARGV[4] "1" = reentrant   ARGV[5] "1" = fair   ARGV[6] ms a queued waiter stays queued (0 = do not queue)
-- ARGV[7] "1" = the fence counter must exist (the caller seeds it from the guarded resource)
-- Returns {1, fence} when the caller holds the lock, {0, pttl} when not (pttl -1 = unknown),
--         {2, 0} when the fence counter is missing and must be seeded first (nothing changed).
local lockKey, fenceKey, queueKey, deadlineKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local token, id, ttl = ARGV[1], ARGV[2], tonumber(ARGV[3])
local field = 'a:' .. id
local reentrant, fair, queueFor = ARGV[4] == '1', ARGV[5] == '1', tonumber(ARGV[6])
local seeded = ARGV[7] == '1'

-- Only ever lengthen: another acquisition of the same owner may hold a longer lease.
local function extend()
  if redis.call('PTTL', lockKey) < ttl then redis.call('PEXPIRE', lockKey, ttl) end
end

local owner = redis.call('HGET', lockKey, 'owner')
if owner == token then
  local fence = redis.call('HGET', lockKey, field)
  if fence then
    -- The reply to an earlier run of this attempt was lost and the call is being retried.
    extend()
    return {1, tonumber(fence)}
  end
end

-- A missing counter means Redis lost it: INCR would restart fences at 1, below
-- fences the guarded resource has already seen.
if seeded and redis.call('EXISTS', fenceKey) == 0 then return {2, 0} end

if owner == token then
  if reentrant then
    local fence = redis.call('INCR', fenceKey)
    redis.call('HSET', lockKey, field, fence)
    extend()
    return {1, fence}
  end
  return {0, redis.call('PTTL', lockKey)}
end

local function nowMs()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Queue the caller, or push back its deadline: a live waiter re-polls well within queueFor.
local function enqueue(now)
  if queueFor <= 0 then return end
  if not redis.call('ZSCORE', deadlineKey, id) then
    redis.call('RPUSH', queueKey, id)
  end
  redis.call('ZADD', deadlineKey, now + queueFor, id)
  for _, k in ipairs({queueKey, deadlineKey}) do
    if redis.call('PTTL', k) < queueFor * 2 then redis.call('PEXPIRE', k, queueFor * 2) end
  end
end

local head = false
local now = 0
if fair then
  now = nowMs()
  -- Drop waiters at the head that stopped polling, so a dead waiter never blocks the queue.
  for _ = 1, 1000 do
    head = redis.call('LINDEX', queueKey, 0)
    if not head then break end
    local deadline = redis.call('ZSCORE', deadlineKey, head)
    if deadline and tonumber(deadline) > now then break end
    redis.call('LPOP', queueKey)
    redis.call('ZREM', deadlineKey, head)
    head = false
  end
end

if owner then
  local pttl = redis.call('PTTL', lockKey)
  if pttl == -1 then
    -- A lock without a TTL (set in two steps by a client that crashed in
    -- between) would block everyone forever. Give it one lease: it then
    -- expires like any other, and one contender gets it. Never take it over
    -- here: every contender would.
    redis.call('PEXPIRE', lockKey, ttl)
    pttl = ttl
  end
  if fair then enqueue(now) end
  return {0, pttl}
end

if fair and head and head ~= id then
  enqueue(now)
  return {0, -1}
end
if fair and head == id then
  redis.call('LPOP', queueKey)
  redis.call('ZREM', deadlineKey, id)
end

local fence = redis.call('INCR', fenceKey)
redis.call('HSET', lockKey, 'owner', token, 'first', fence, field, fence)
redis.call('PEXPIRE', lockKey, ttl)
return {1, fence}
