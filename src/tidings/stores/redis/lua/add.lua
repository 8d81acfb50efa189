-- Insert ids into many feeds, keeping each feed sorted, unique and capped.
--
-- KEYS: feed keys
-- ARGV[1] max_length    ARGV[2] slack: trimmed entries a value may carry
-- ARGV[3] floor: 16-byte id below which entries are expired, or ''
-- ARGV[4] ttl in ms, or '': the key expires ttl after its newest entry
-- ARGV[5..] 16-byte ids, ascending
--
-- A feed is one string of 16-byte ids in ascending order, nothing else.
-- Its visible entries are the last max_length; older ones are trimmed
-- logically and dropped when the value is next rewritten. Every rewrite
-- (out-of-order insert, removal, compaction) first drops the trimmed ones,
-- so an entry the cap removed never comes back.
--
-- The common case, a new newest id, is two O(1) commands: GETRANGE of the
-- last id and APPEND. The value is compacted once it carries `slack`
-- trimmed ids, which amortises the copy.

local max_length = tonumber(ARGV[1])
local limit = (max_length + tonumber(ARGV[2])) * 16
local floor = ARGV[3]
local ttl = tonumber(ARGV[4])
local nids = #ARGV - 4

local function expire(key, newest)
  if ttl then
    local hi, lo = struct.unpack('>I2I4', newest)
    redis.call('PEXPIREAT', key, string.format('%.0f', hi * 4294967296 + lo + ttl))
  end
end

-- The visible entries of value v as a sorted table.
local function visible(v)
  local n = #v / 16
  local first = n - max_length
  if first < 0 then first = 0 end
  local entries = {}
  for i = first, n - 1 do entries[#entries + 1] = string.sub(v, i * 16 + 1, i * 16 + 16) end
  return entries
end

-- Store a sorted table of ids: cap, floor, or delete when nothing is left.
local function store(key, entries, newest_before)
  local count = #entries
  local first = 1
  if count > max_length then first = count - max_length + 1 end
  if floor ~= '' then
    while first <= count and entries[first] < floor do first = first + 1 end
  end
  if first > count then
    redis.call('DEL', key)
    return
  end
  redis.call('SET', key, table.concat(entries, '', first, count), 'KEEPTTL')
  if entries[count] ~= newest_before then expire(key, entries[count]) end
end

-- Binary search among the first n entries (the sorted, pre-existing ones).
local function contains(entries, n, id)
  local lo, hi = 1, n
  while lo <= hi do
    local mid = math.floor((lo + hi) / 2)
    local e = entries[mid]
    if e == id then return true elseif e < id then lo = mid + 1 else hi = mid - 1 end
  end
  return false
end

local function merge(key)
  local v = redis.call('GET', key) or ''
  local entries = visible(v)
  local held = #entries
  local newest = entries[held]
  local added = false
  for i = 5, #ARGV do
    if not contains(entries, held, ARGV[i]) then
      entries[#entries + 1] = ARGV[i]
      added = true
    end
  end
  if added then
    table.sort(entries)
    store(key, entries, newest)
  end
end

local id = ARGV[5]
for _, key in ipairs(KEYS) do
  if nids == 1 then
    local last = redis.call('GETRANGE', key, -16, -1)
    if last == '' or id > last then
      if redis.call('APPEND', key, id) > limit then
        store(key, visible(redis.call('GET', key)), id)
      else
        expire(key, id)
      end
    elseif id ~= last then
      merge(key)
    end
  else
    merge(key)
  end
end
return #KEYS
