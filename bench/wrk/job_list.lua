-- wrk script for bench/list_bench.sh: every request a different job-list query (tab, type, page
-- or cursor), so no two consecutive requests ask the same thing.
--   LIST_MODE=first  page 1 of a random tab and type
--   LIST_MODE=deep   page=2000 of a random tab and type
--   LIST_MODE=cursor the cursor form from a random point deep in the list
local tabs = {"all", "pending", "active", "completed", "failed", "dead", "cancelled"}
local types = {"", "noop", "distribution_execute", "notification_send"}
local mode = os.getenv("LIST_MODE") or "first"
local token = os.getenv("LIST_TOKEN")
local cursors = {}
for c in string.gmatch(os.getenv("LIST_CURSORS") or "", "[0-9a-f]+") do cursors[#cursors + 1] = c end
local n = 0

request = function()
  n = n + 1
  local q = "status=" .. tabs[(n % #tabs) + 1]
  local t = types[(math.floor(n / #tabs) % #types) + 1]
  if t ~= "" then q = q .. "&type=" .. t end
  if mode == "deep" then
    q = q .. "&page=2000"
  elseif mode == "cursor" then
    q = "cursor=" .. cursors[(n % #cursors) + 1]
  end
  return wrk.format("GET", "/api/v1/projects/default/jobs?" .. q, {["Authorization"] = "Bearer " .. token})
end
