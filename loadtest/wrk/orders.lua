-- wrk script: order attempts on one item, a distinct user_id per request
-- (and per wrk thread), so every attempt is a new buyer.
--
--   wrk -t2 -c64 -d10s -s loadtest/wrk/orders.lua http://127.0.0.1:8080 -- ITEM_ID [PREFIX] [same]
--
-- ITEM_ID is the item to buy; PREFIX (default "wrk") starts every user id,
-- so repeated runs against one item can use fresh users. A third argument
-- "same" sends every request as the one user PREFIX (the already-purchased
-- path). wrk counts any status other than 2xx/3xx as "Non-2xx or 3xx
-- responses": sold out (409) lands there, a 202 does not. At the end the
-- script prints one line "wrk-summary {json}" with the counts that
-- loadtest/bench-ratios.sh checks against the database.

local threads = {}
local counter = 0

function setup(thread)
  counter = counter + 1
  thread:set("tid", counter)
  table.insert(threads, thread)
end

function init(args)
  item = args[1] or "1"
  same = args[3] == "same"
  if same then
    prefix = args[2] or "wrk"
  else
    prefix = (args[2] or "wrk") .. "-t" .. tid .. "-"
  end
  n = 0
  path = "/api/v1/items/" .. item .. "/orders"
  headers = { ["Content-Type"] = "application/json" }
end

function request()
  n = n + 1
  if same then
    return wrk.format("POST", path, headers, '{"user_id":"' .. prefix .. '"}')
  end
  return wrk.format("POST", path, headers, '{"user_id":"' .. prefix .. n .. '"}')
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'wrk-summary {"requests":%d,"non2xx":%d,"connect":%d,"read":%d,"write":%d,"timeout":%d,"p99_us":%d}\n',
    summary.requests, e.status, e.connect, e.read, e.write, e.timeout, latency:percentile(99)))
end
