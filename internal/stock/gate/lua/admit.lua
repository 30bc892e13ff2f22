-- The checks every sale makes in the gate, in this order: the sale window,
-- the buyer's one unit, what is left. This file is the prelude of
-- reserve.lua and of the queue's enqueue.lua (scripts.go concatenates it
-- in front of them), so the rule is written once.
--
-- refusal(m, prev, now): m is HMGET meta 'stock', 'taken', 'starts', 'ends',
-- 'soldout'; prev the order id the buyer holds (false: none); now unix ms.
-- Returns the refusal's status, or nil when a unit may be taken.
local function refusal(m, prev, now)
  local stock, taken, starts, ends, soldout = m[1], m[2], tonumber(m[3]) or 0, tonumber(m[4]) or 0, m[5]
  if starts > 0 and now < starts then
    return 'not_started'
  end
  if ends > 0 and now >= ends then
    return 'ended'
  end
  if prev then
    return 'dup'
  end
  -- soldout is the stock at which the database said sold out: the gate
  -- sends nobody there until the stock changes.
  if soldout == stock or (tonumber(taken) or 0) >= (tonumber(stock) or 0) then
    return 'sold_out'
  end
  return nil
end

