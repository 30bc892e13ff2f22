-- wrk script for a waiting room's two hot paths (issue 21):
--
--   wrk -t2 -c64 -d10s -s loadtest/wrk/room.lua http://127.0.0.1:8080 -- join ITEM [PREFIX]
--   wrk -t2 -c64 -d10s -s loadtest/wrk/room.lua http://127.0.0.1:8080 -- poll ITEM TICKETS_FILE
--
-- join: POST /api/v1/items/ITEM/queue with a distinct user_id per request
-- (and per wrk thread): every request is a new place in line. PREFIX
-- (default "wrk") starts every user id; use a fresh one for each run
-- against the same item.
-- poll: GET /api/v1/items/ITEM/queue/{ticket}, going round the tickets
-- listed in TICKETS_FILE (one opaque ticket a line, as joins answered).
--
-- At the end the script prints one line "wrk-summary {json}" with the
-- counts loadtest/bench-room.sh checks (every answer must be a 200).

local threads = {}
local counter = 0

function setup(thread)
  counter = counter + 1
  thread:set("tid", counter)
  table.insert(threads, thread)
end

local function escape(s)
  return (s:gsub("[^%w%-%._~]", function(c) return string.format("%%%02X", string.byte(c)) end))
end

function init(args)
  mode = args[1]
  item = args[2] or "1"
  n = 0
  -- Requests are made once where they can be (as wrk does for a run
  -- without a script) or from parts made once, not with wrk.format a
  -- request: the client's own cost a request stays close to that of the
  -- /healthz row it is compared with.
  if mode == "join" then
    prefix = '{"user_id":"' .. (args[3] or "wrk") .. "-t" .. tid .. "-"
    head = "POST /api/v1/items/" .. item .. "/queue HTTP/1.1\r\nHost: " .. wrk.headers["Host"] ..
      "\r\nContent-Type: application/json\r\nContent-Length: "
  elseif mode == "poll" then
    reqs = {}
    for line in io.lines(args[3]) do
      if line ~= "" then
        table.insert(reqs, wrk.format("GET", "/api/v1/items/" .. item .. "/queue/" .. escape(line)))
      end
    end
    assert(#reqs > 0, "no ticket in " .. args[3])
    n = (tid * 7919) % #reqs -- threads start at different tickets
  else
    error("room.lua: the first argument is join or poll")
  end
end

function request()
  n = n + 1
  if mode == "join" then
    local body = prefix .. n .. '"}'
    return head .. #body .. "\r\n\r\n" .. body
  end
  return reqs[(n % #reqs) + 1]
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'wrk-summary {"requests":%d,"non2xx":%d,"connect":%d,"read":%d,"write":%d,"timeout":%d,"p99_us":%d}\n',
    summary.requests, e.status, e.connect, e.read, e.write, e.timeout, latency:percentile(99)))
end
