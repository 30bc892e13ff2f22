-- Release one acquisition; free the lock when it was the owner's last one.
-- KEYS[1] lock hash   KEYS[2] fence counter   KEYS[3] release record (hash)
-- KEYS[4] fair queue  KEYS[5] fair deadlines
-- ARGV[1] owner token   ARGV[2] attempt id   ARGV[3] fence of that attempt   ARGV[4] wake channel
-- Returns 1 released and lock freed, 2 released but the owner still holds re-entries,
--        -1 expired (key gone), -2 held by another owner.
local lockKey, fenceKey, recordKey, queueKey, deadlineKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local token, id, fence, channel = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]

local owner = redis.call('HGET', lockKey, 'owner')
if owner == token then
  -- HDEL finds nothing when this is a retry of a release whose reply was lost; still released.
  redis.call('HDEL', lockKey, 'a:' .. id)
  if redis.call('HLEN', lockKey) > 2 then return 2 end
  local first = redis.call('HGET', lockKey, 'first')
  redis.call('DEL', lockKey)
  -- Remember who released which fences, so a retried release is reported as released, not expired.
  redis.call('HSET', recordKey, 'owner', token, 'from', first, 'to', redis.call('GET', fenceKey))

  -- Wake the head of the fair queue by its id, or any one waiter with an empty message.
  local message = ''
  local head = redis.call('LINDEX', queueKey, 0)
  if head then
    local t = redis.call('TIME')
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    for _ = 1, 1000 do
      local deadline = redis.call('ZSCORE', deadlineKey, head)
      if deadline and tonumber(deadline) > now then break end
      redis.call('LPOP', queueKey)
      redis.call('ZREM', deadlineKey, head)
      head = redis.call('LINDEX', queueKey, 0)
      if not head then break end
    end
    if head then message = head end
  end
  redis.call('PUBLISH', channel, message)
  return 1
end

local record = redis.call('HMGET', recordKey, 'owner', 'from', 'to')
if record[1] == token and tonumber(record[2]) <= fence and fence <= tonumber(record[3]) then
  return 1
end
if owner then return -2 end
return -1
