-- Take over the entries of a writer presumed dead (its lease key is gone):
-- claim those it still owns and that have been idle at least min_idle, in
-- one step, so two survivors never both claim an entry (the second finds
-- it owned by the first) and each entry gets exactly one more delivery.
-- Once the dead writer owns nothing, it is removed from the group.
-- Replies {'ok', pending rows before the claim ({id, consumer, idle,
-- deliveries}), the claimed entries ({id, fields})}.
local stream = KEYS[1] -- the item's order stream
local group, dead, taker = ARGV[1], ARGV[2], ARGV[3] -- dead and taker: consumers
local min_idle, count = ARGV[4], ARGV[5]             -- ms; most entries
local rows = redis.call('XPENDING', stream, group, 'IDLE', min_idle, '-', '+', count, dead)
local claimed = {}
local chunk = {}
local function claim()
  local got = redis.call('XCLAIM', stream, group, taker, 0, unpack(chunk))
  for _, e in ipairs(got) do
    if e then claimed[#claimed + 1] = e end
  end
  chunk = {}
end
for _, p in ipairs(rows) do
  chunk[#chunk + 1] = p[1]
  if #chunk == 100 then claim() end
end
if #chunk > 0 then claim() end
-- An entry deleted from the stream has nothing left to write: Redis 7 drops
-- it from the pending list on XCLAIM, miniredis keeps it; acknowledge it.
if #claimed < #rows then
  local have = {}
  for _, e in ipairs(claimed) do have[e[1]] = true end
  for _, p in ipairs(rows) do
    if not have[p[1]] then redis.call('XACK', stream, group, p[1]) end
  end
end
if #redis.call('XPENDING', stream, group, '-', '+', 1, dead) == 0 then
  redis.call('XGROUP', 'DELCONSUMER', stream, group, dead)
end
return {'ok', rows, claimed}
