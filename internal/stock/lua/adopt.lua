-- After Redis lost an item's queue while a writer was committing a batch,
-- the gate may have been rebuilt from a database that did not have the
-- batch yet. Count the batch's orders in the gate, each once: a buyer
-- already recorded with this order is counted; a missing one is added and
-- its unit taken.
-- KEYS[1] item meta hash, KEYS[2] buyers hash
-- ARGV pairs: user id, order id
-- Returns {added, clashes}: buyers added (and units taken), and buyers who
-- hold another order now. No gate: {0, 0}; the next order rebuilds it from
-- the database, which has the batch.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return {0, 0}
end
local added, clashes = 0, 0
for i = 1, #ARGV, 2 do
  local cur = redis.call('HGET', KEYS[2], ARGV[i])
  if not cur then
    redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
    redis.call('HINCRBY', KEYS[1], 'taken', 1)
    added = added + 1
  elseif cur ~= ARGV[i + 1] then
    clashes = clashes + 1
  end
end
return {added, clashes}
