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
  if mode == "join" then
    prefix = (args[3] or "wrk") .. "-t" .. tid .. "-"
    path = "/api/v1/items/" .. item .. "/queue"
    headers = { ["Content-Type"] = "application/json" }
  elseif mode == "poll" then
    paths = {}
    for line in io.lines(args[3]) do
      if line ~= "" then
        table.insert(paths, "/api/v1/items/" .. item .. "/queue/" .. escape(line))
      end
    end
    assert(#paths > 0, "no ticket in " .. args[3])
    n = (tid * 7919) % #paths -- threads start at different tickets
  else
    error("room.lua: the first argument is join or poll")
  end
end

function request()
  n = n + 1
  if mode == "join" then
    return wrk.format("POST", path, headers, '{"user_id":"' .. prefix .. n .. '"}')
  end
  return wrk.format("GET", paths[(n % #paths) + 1])
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'wrk-summary {"requests":%d,"non2xx":%d,"connect":%d,"read":%d,"write":%d,"timeout":%d,"p99_us":%d}\n',
    summary.requests, e.status, e.connect, e.read, e.write, e.timeout, latency:percentile(99)))
end
