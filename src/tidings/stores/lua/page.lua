-- Read a page of ids, newest first (see add.lua for the value layout).
--
-- KEYS[1] feed key
-- ARGV[1] limit   ARGV[2] max_length
-- ARGV[3] before: 16-byte id (exclusive) or ''
-- ARGV[4] floor: 16-byte id, entries below it are expired, or ''
-- Returns the page's ids concatenated, oldest first.

local key = KEYS[1]
local limit = tonumber(ARGV[1])
local max_length = tonumber(ARGV[2])
local before = ARGV[3]
local floor = ARGV[4]

local n = redis.call('STRLEN', key) / 16
if n == 0 then return '' end
local count = math.min(n, max_length)
local v = redis.call('GETRANGE', key, (n - count) * 16, -1)

local function lower_bound(id)
  local lo, hi = 0, count
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if string.sub(v, mid * 16 + 1, mid * 16 + 16) < id then lo = mid + 1 else hi = mid end
  end
  return lo
end

local hi = count
if before ~= '' then hi = lower_bound(before) end
local lo = 0
if floor ~= '' then lo = lower_bound(floor) end
if hi - limit > lo then lo = hi - limit end
if lo >= hi then return '' end
return string.sub(v, lo * 16 + 1, hi * 16)
