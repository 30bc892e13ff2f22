-- Move up to ARGV[1] entries of an item's dead-letter stream back to its
-- order stream, as new entries (so the writers' group delivers them again,
-- with a fresh delivery count), each move atomic.
-- KEYS[1] dead-letter stream, KEYS[2] order stream
local msgs = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', ARGV[1])
for _, m in ipairs(msgs) do
  local f = m[2]
  local vals = {}
  for i = 1, #f, 2 do
    local k = f[i]
    if k == 'o' or k == 'u' or k == 'k' or k == 't' or k == 'e' then
      table.insert(vals, k)
      table.insert(vals, f[i + 1])
    end
  end
  redis.call('XADD', KEYS[2], '*', unpack(vals))
  redis.call('XDEL', KEYS[1], m[1])
end
return #msgs
