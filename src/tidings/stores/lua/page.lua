-- Read a page of ids, newest first (see add.lua for the value layout).
--
-- KEYS[1] feed key
-- ARGV[1] limit   ARGV[2] before: 16-byte id (exclusive) or ''
-- ARGV[3] floor: 16-byte id, entries below it are expired, or ''
-- Returns the page's ids concatenated, oldest first.

local HDR = 28
local key = KEYS[1]
local limit = tonumber(ARGV[1])
local before = ARGV[2]
local floor = ARGV[3]

local h = redis.call('GETRANGE', key, 0, HDR - 1)
if h == '' then return '' end
local start, n = struct.unpack('>I4I4', h)
if n <= start then return '' end
local v = redis.call('GETRANGE', key, HDR + start * 16, HDR + n * 16 - 1)
local count = n - start

local function lower_bound(id)
  local lo, hi = 0, count
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if string.sub(v, 1 + mid * 16, 16 + mid * 16) < id then lo = mid + 1 else hi = mid end
  end
  return lo
end

local hi = count
if before ~= '' then hi = lower_bound(before) end
local lo = 0
if floor ~= '' then lo = lower_bound(floor) end
if hi - limit > lo then lo = hi - limit end
if lo >= hi then return '' end
return string.sub(v, 1 + lo * 16, hi * 16)
