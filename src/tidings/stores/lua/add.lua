-- Insert ids into many feeds, keeping each feed sorted and capped.
--
-- KEYS: feed keys (one per feed; each its own hash slot group)
-- ARGV[1] max_length   ARGV[2] capacity limit (max_length + slack)
-- ARGV[3] floor: 16-byte id below which entries are expired, or ''
-- ARGV[4] ttl in ms ('' for none): the key expires ttl after its newest entry
-- ARGV[5..] 16-byte ids, ascending
--
-- A feed value is a 28-byte header followed by `cap` 16-byte slots:
--   start (u32)  first visible slot; slots before it were trimmed
--   n     (u32)  slots in use
--   cap   (u32)  slots allocated (the value is padded to 28 + 16*cap bytes)
--   last  (16)   the newest id, so the common append needs one read
-- The value is padded to its capacity because SETRANGE past the end of a
-- string makes Redis double its allocation; writing inside it does not.

local max_length = tonumber(ARGV[1])
local cap_limit = tonumber(ARGV[2])
local floor = ARGV[3]
local ttl = tonumber(ARGV[4])
local HDR = 28

local function header(start, n, cap, last)
  return struct.pack('>I4I4I4', start, n, cap) .. last
end

local function expire(key, last)
  if ttl then
    local hi, lo = struct.unpack('>I2I4', last)
    redis.call('PEXPIREAT', key, string.format('%.0f', hi * 4294967296 + lo + ttl))
  end
end

-- Rewrite a feed from a sorted table of visible ids: cap, floor, padding.
local function rewrite(key, entries, last_before)
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
  local visible = count - first + 1
  local cap = 4
  while cap < visible + 1 do cap = cap * 2 end
  if cap > cap_limit then cap = math.max(cap_limit, visible) end
  local last = entries[count]
  local body = table.concat(entries, '', first, count)
  redis.call('SET', key, header(0, visible, cap, last) .. body .. string.rep('\0', 16 * (cap - visible)))
  if last ~= last_before then expire(key, last) end
end

-- Binary search for id among slots [lo, hi) of value v; returns (found, index).
local function search(v, lo, hi, id)
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    local e = string.sub(v, HDR + 1 + mid * 16, HDR + 16 + mid * 16)
    if e < id then lo = mid + 1 elseif e > id then hi = mid else return true, mid end
  end
  return false, lo
end

local nids = #ARGV - 4
for _, key in ipairs(KEYS) do
  local h = redis.call('GETRANGE', key, 0, HDR - 1)
  if h == '' then
    local entries = {}
    for i = 5, #ARGV do entries[#entries + 1] = ARGV[i] end
    rewrite(key, entries, nil)
  else
    local start, n, cap = struct.unpack('>I4I4I4', h)
    local last = string.sub(h, 13, 28)
    local id = ARGV[5]
    if nids == 1 and id > last and n < cap then
      -- Fast path: a new newest entry with room to spare.
      redis.call('SETRANGE', key, HDR + n * 16, id)
      n = n + 1
      if n - start > max_length then start = start + 1 end
      redis.call('SETRANGE', key, 0, header(start, n, cap, id))
      expire(key, id)
    elseif not (nids == 1 and id == last) then
      -- Slow path: out of order, several ids, or out of room.
      local v = redis.call('GET', key)
      local changed = false
      local entries = {}
      for i = start, n - 1 do
        entries[#entries + 1] = string.sub(v, HDR + 1 + i * 16, HDR + 16 + i * 16)
      end
      for i = 5, #ARGV do
        if not search(v, start, n, ARGV[i]) then
          entries[#entries + 1] = ARGV[i]
          changed = true
        end
      end
      if changed or n == cap then
        table.sort(entries)
        rewrite(key, entries, last)
      end
    end
  end
end
return #KEYS
