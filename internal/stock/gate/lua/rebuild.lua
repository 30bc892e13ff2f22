-- Install one bucket of a gate rebuilt from the database (see rebuild.go).
-- The buyers and the released set were staged under temporary keys first,
-- in slices (there may be millions); this script puts them in place and
-- writes the meta in one step, so the bucket serves either not at all (no
-- meta: every script answers 'missing') or with everything it holds.
--
-- A reservation the bucket held for an order not in the database is kept
-- (its write is in flight) only if it is still held and was not handed
-- back: the check and the rewrite are one step, so a hand-back that ran at
-- any moment before it (and found no meta, so returned nothing) is seen
-- here, and the unit it gave up is not counted as taken. A hand-back that
-- comes after this, while its order's release bucket is still missing, is
-- finished by Rebuild once every bucket is installed (see rebuild.go).
-- Replies {status, kept, order ids}: 'built', how many held reservations
-- were kept, and their order ids.
local meta = KEYS[1]
local buyers = KEYS[2]
local released = KEYS[3]
local moves_out = KEYS[4]
local new_buyers = KEYS[5]    -- staged: the database's buyers of this bucket (may not exist)
local new_released = KEYS[6]  -- staged: the cancelled orders released here (may not exist)
local first_void = 7          -- KEYS[7..]: the void marker of each held reservation below
local stock, taken, starts, ends = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4] -- taken counts every held reservation below
local built, epoch = ARGV[5], ARGV[6]
local roomed = ARGV[7]        -- '1': a lua-async item with a waiting room (room.go); '' otherwise
local first_held = 8          -- ARGV[8..]: pairs (user, order id) of the held reservations to keep

local kept = 0
local reply = {'built', 0} -- then the kept orders' ids
for i = first_held, #ARGV, 2 do
  local user, order = ARGV[i], ARGV[i + 1]
  local void = KEYS[first_void + (i - first_held) / 2]
  if redis.call('HGET', buyers, user) == order and redis.call('EXISTS', void) == 0 then
    redis.call('HSET', new_buyers, user, order)
    kept = kept + 1
    reply[2 + kept] = order
  else
    taken = taken - 1 -- handed back meanwhile: its unit is free
  end
end
if redis.call('EXISTS', new_buyers) == 1 then
  redis.call('RENAME', new_buyers, buyers)
  redis.call('PERSIST', buyers)
else
  redis.call('DEL', buyers)
end
if redis.call('EXISTS', new_released) == 1 then
  redis.call('RENAME', new_released, released)
  redis.call('PERSIST', released)
else
  redis.call('DEL', released)
end
-- Moves under way are dropped: the snapshot counts their units. A mover
-- that holds a record across this finds the build changed (movein.lua),
-- and the ids of the moves received stay, so none applies again.
redis.call('DEL', moves_out)
redis.call('DEL', meta)
redis.call('HSET', meta, 'stock', stock, 'taken', taken, 'starts', starts, 'ends', ends,
  'soldout', '', 'built', built, 'epoch', epoch)
if roomed == '1' then
  redis.call('HSET', meta, 'room', '1')
end
reply[2] = kept
return reply
