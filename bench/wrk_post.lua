-- wrk script: POST one JSON-RPC request over and over, each with its own id (a session's ids must be
-- unique), count answers that are no JSON-RPC result as failed, and print a JSON summary at the end.
-- Environment: BODY (the request, its id written as the bare word __ID__), HEADERS (a "name: value" per line).
local prefix, suffix = string.match(os.getenv("BODY"), "^(.-)__ID__(.*)$")
local headers = {}
for line in string.gmatch(os.getenv("HEADERS"), "[^\n]+") do
  local name, value = string.match(line, "^([^:]+):%s*(.*)$")
  headers[name] = value
end

local threads = {}
function setup(thread)
  thread:set("next_id", #threads * 1000000000)
  table.insert(threads, thread)
end

failed = 0
function request()
  next_id = next_id + 1
  return wrk.format("POST", nil, headers, prefix .. next_id .. suffix)
end

function response(status, _, body)
  if status ~= 200 or not string.find(body, '"result"', 1, true) then
    failed = failed + 1
  end
end

function done(summary, latency, _)
  local answered_badly = 0
  for _, thread in ipairs(threads) do
    answered_badly = answered_badly + thread:get("failed")
  end
  local errors = summary.errors
  io.write(string.format(
    '{"requests": %d, "duration_us": %d, "failed": %d, "p50_us": %d, "p99_us": %d}\n',
    summary.requests, summary.duration,
    answered_badly + errors.connect + errors.read + errors.write + errors.timeout,
    latency:percentile(50), latency:percentile(99)
  ))
end
