-- Move the entries of an item's dead-letter stream back to its order
-- stream, as new entries (so the writers' group delivers them again, with a
-- fresh delivery count), each move atomic, looking at up to ARGV[1] entries
-- from ARGV[2] on. An entry without an order id or a user is no order: it
-- stays where it is, for an operator to read, and is stepped over, so it
-- never stops the requeue of the entries after it.
-- Stream fields: see entry.go (FieldOrder, FieldUser, FieldKey, FieldTime,
-- FieldEpoch); change both together.
-- Replies {'ok', moved, kept, the last entry looked at ('' when none was)}.
local dead = KEYS[1]   -- dead-letter stream
local stream = KEYS[2] -- order stream
local count = ARGV[1]  -- most entries to look at
local start = ARGV[2]  -- '-', or '(' and the last entry looked at before
local moved, kept, last = 0, 0, ''
for _, m in ipairs(redis.call('XRANGE', dead, start, '+', 'COUNT', count)) do
  last = m[1]
  local f = m[2]
  local vals, has = {}, {}
  for i = 1, #f, 2 do
    local k = f[i]
    if k == 'o' or k == 'u' or k == 'k' or k == 't' or k == 'e' then
      table.insert(vals, k)
      table.insert(vals, f[i + 1])
      has[k] = true
    end
  end
  if has['o'] and has['u'] then
    redis.call('XADD', stream, '*', unpack(vals))
    redis.call('XDEL', dead, m[1])
    moved = moved + 1
  else
    kept = kept + 1
  end
end
return {'ok', moved, kept, last}
