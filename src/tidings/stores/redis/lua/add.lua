-- Insert ids into many feeds, keeping each feed sorted, unique and capped.
--
-- KEYS: feed keys
-- ARGV[1] max_length    ARGV[2] slack: trimmed entries a value may carry
-- ARGV[3] floor: 16-byte id below which entries are expired, or ''
-- ARGV[4] ttl in ms, or '': the key expires ttl after its newest entry
-- ARGV[5] the ids of every key: 16-byte ids concatenated, ascending, unique
--   (add: a fan-out sends its ids once, however many keys), or
-- ARGV[5..] one such string per key, in the order of KEYS (add_each: each
--   feed its own ids). With one key the two forms are the same.
--
-- A feed is one string of 16-byte ids in ascending order, nothing else.
-- Its visible entries are the last max_length; older ones are trimmed
-- logically and dropped when the value is next compacted (or rewritten by a
-- removal). An id below a full feed's oldest visible entry is not inserted:
-- the cap would drop it at once, and so an entry the cap removed never
-- comes back. Ids below the floor are not inserted either.
--
-- No write reads or rewrites the whole feed:
-- * ids newer than its newest entry (the common case) are appended: GETRANGE
--   of the tail, APPEND;
-- * others are merged into the shortest suffix that starts below the oldest
--   of them: GETRANGEs of growing suffixes (TAIL entries, then 4 times as
--   many, up to the visible entries), merged here and written back from the
--   first insert with SETRANGE, which extends the string. An id a few
--   entries from the end costs a STRLEN and a SETRANGE more than an append.
-- The value is compacted once it carries `slack` trimmed ids, which
-- amortises that copy.
--
-- Ids compare as Lua strings, by the server's collation: bytewise under the
-- C locales (C, C.UTF-8, POSIX), which page.lua and remove.lua rely on too.

local max_length = tonumber(ARGV[1])
local limit = (max_length + tonumber(ARGV[2])) * 16
local floor = ARGV[3]
local ttl = tonumber(ARGV[4])
local shared = #ARGV == 5
local TAIL = 8
local sub, call = string.sub, redis.call

-- Expire the key ttl after the newest entry, the id ending `ids`.
local function expire(key, ids)
  if ttl then
    local hi, lo = struct.unpack('>I2I4', ids, #ids - 15)
    call('PEXPIREAT', key, string.format('%.0f', hi * 4294967296 + lo + ttl))
  end
end

local function at(s, i)
  return sub(s, i * 16 + 1, i * 16 + 16)
end

-- The first entry of s in [lo, hi) (0-based) that is not below id, or hi;
-- and that entry, when it was read here or is given (`above`, the entry at
-- hi, if known), which tells a duplicate without reading it again.
local function lower_bound(s, id, lo, hi, above)
  while lo < hi do
    local mid = lo + hi
    mid = (mid - mid % 2) / 2
    local e = sub(s, mid * 16 + 1, mid * 16 + 16)
    if e < id then lo = mid + 1 else hi, above = mid, e end
  end
  return lo, above
end

-- lower_bound in [0, hi), probing back from hi by doubling steps first:
-- O(log d) for an answer d entries below hi, so a near-newest id costs a
-- compare or two.
local function lower_bound_back(s, id, hi)
  local lo, step, above = 0, 1, nil
  while hi - step >= lo do
    local probe = hi - step
    local e = sub(s, probe * 16 + 1, probe * 16 + 16)
    if e < id then
      lo = probe + 1
      break
    end
    hi, above, step = probe, e, step * 2
  end
  return lower_bound(s, id, lo, hi, above)
end

-- The ids that may be stored: at or above the floor, and only the newest
-- max_length of them (more would be trimmed by the others at once).
local function usable(ids)
  local n = #ids / 16
  local first = 0
  if floor ~= '' then first = lower_bound(ids, floor, 0, n) end
  if n - first > max_length then first = n - max_length end
  if first == 0 then return ids end
  return sub(ids, first * 16 + 1)
end

-- Keep the visible entries at or above the floor; delete an emptied feed.
local function compact(key)
  local v = call('GETRANGE', key, -max_length * 16, -1)
  local first = 0
  if floor ~= '' then first = lower_bound(v, floor, 0, #v / 16) end
  if first * 16 == #v then
    call('DEL', key)
  else
    call('SET', key, sub(v, first * 16 + 1), 'KEEPTTL')
  end
end

local function append(key, ids)
  if call('APPEND', key, ids) > limit then compact(key) end
  expire(key, ids)
end

-- The suffix of the visible entries that starts below `oldest` (or all of
-- them), given the last entries `tail`: {suffix, its length, whether it is
-- all the visible entries of a full feed, the feed's length}.
local function suffix(key, tail, oldest)
  local n = call('STRLEN', key) / 16
  local visible = math.min(n, max_length)
  local span = #tail / 16
  if span > visible then
    -- A small cap: the tail read reaches into the trimmed entries.
    tail, span = sub(tail, -visible * 16), visible
  end
  while span < visible and at(tail, 0) >= oldest do
    span = math.min(span * 4, visible)
    tail = call('GETRANGE', key, (n - span) * 16, -1)
  end
  return tail, span, span == max_length, n
end

-- The ids from the first-th on merged into the suffix tail of span entries:
-- where the merged part starts (in entries into tail), the merged part, and
-- how many ids it adds. Lua spends most here on making strings, so the
-- common case (the ids all fall between the same two entries, as when one
-- delivery's batch lands under another's) takes no string per id.
local function merge(tail, span, ids, first)
  local count = #ids / 16
  local high = sub(ids, -16)
  local k, entry = lower_bound_back(tail, high, span)
  if entry ~= high then
    local low = k
    if first < count - 1 then low = lower_bound_back(tail, at(ids, first), k) end
    if low == k then
      return k, sub(ids, first * 16 + 1) .. sub(tail, k * 16 + 1), count - first
    end
  elseif first == count - 1 then
    return k, '', 0
  end
  -- Newest first: each id's place is found back from the previous one's,
  -- and the merged part is built back to front (pieces in falling slots).
  local pieces, slot, hi, added = {}, 2 * count + 1, span, 0
  for j = count - 1, first, -1 do
    local id = at(ids, j)
    k, entry = lower_bound_back(tail, id, hi)
    if k < hi then
      slot = slot - 1
      pieces[slot] = sub(tail, k * 16 + 1, hi * 16)
      hi = k
    end
    if entry ~= id then
      slot = slot - 1
      pieces[slot] = id
      added = added + 1
    end
  end
  return hi, table.concat(pieces, '', slot, 2 * count), added
end

-- Merge ids (some not newer than the newest entry `last`) into the feed.
local function splice(key, ids, last_entries, last)
  local tail, span, whole, n = suffix(key, last_entries, sub(ids, 1, 16))
  local first = 0
  if whole then
    -- Ids below a full feed's visible entries would be trimmed at once.
    first = lower_bound(ids, sub(tail, 1, 16), 0, #ids / 16)
    if first * 16 == #ids then return end
  end
  local start, merged, added = merge(tail, span, ids, first)
  if added == 0 then return end
  call('SETRANGE', key, (n - span + start) * 16, merged)
  if (n + added) * 16 > limit then compact(key) end
  if ttl and sub(ids, -16) > last then expire(key, ids) end
end

local function insert(key, ids)
  if ids == '' then return end
  local tail = call('GETRANGE', key, -TAIL * 16, -1)
  local last = sub(tail, -16)
  if tail == '' or sub(ids, 1, 16) > last then
    append(key, ids)
  else
    splice(key, ids, tail, last)
  end
end

if shared then
  local ids = usable(ARGV[5])
  for _, key in ipairs(KEYS) do insert(key, ids) end
else
  for i, key in ipairs(KEYS) do insert(key, usable(ARGV[4 + i])) end
end
return #KEYS
