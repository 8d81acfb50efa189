-- Read a page of ids, newest first (see add.lua for the value layout).
--
-- KEYS[1] feed key
-- ARGV[1] limit   ARGV[2] max_length
-- ARGV[3] before: 16-byte id (exclusive) or ''
-- ARGV[4] floor: 16-byte id, entries below it are expired, or ''
-- ARGV[5] activity key prefix, or '' not to fetch activities
-- Returns {the page's ids concatenated, oldest first, then each one's
-- cached activity as stored (version, then JSON: activity_put.lua; false
-- where missing) when ARGV[5] is given}.
--
-- Fetching the activities here saves a round trip per page read. Their keys
-- are not declared, so this is for a single Redis server only: on a cluster
-- the caller passes '' and reads them with MGET per node.

local key = KEYS[1]
local limit = tonumber(ARGV[1])
local max_length = tonumber(ARGV[2])
local before = ARGV[3]
local floor = ARGV[4]
local prefix = ARGV[5]

local n = redis.call('STRLEN', key) / 16
if n == 0 then return {''} end
local count = math.min(n, max_length)
if before == '' and floor == '' and count > limit then
  -- A first page needs only the newest `limit` ids: copy those, not the feed.
  count = limit
end
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
if lo >= hi then return {''} end
local slice = string.sub(v, lo * 16 + 1, hi * 16)
if prefix == '' then return {slice} end
local keys = {}
for i = 0, hi - lo - 1 do keys[#keys + 1] = prefix .. string.sub(slice, i * 16 + 1, i * 16 + 16) end
local out = redis.call('MGET', unpack(keys))
table.insert(out, 1, slice)
return out
