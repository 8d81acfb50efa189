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
-- * ids all newer than its newest entry (the common case) are appended:
--   GETRANGE of the tail, APPEND;
-- * others are merged into the shortest suffix that starts below the oldest
--   of them, read with GETRANGEs of growing suffixes (the tail, then 4 times
--   as many entries each time, up to the visible ones), and written back
--   from the first insert with SETRANGE, which extends the string. Ids a few
--   entries from the end cost a STRLEN, a SETRANGE for the APPEND and some
--   Lua: under twice an append, where a rewrite of the feed cost ~200 times.
-- The value is compacted once it carries `slack` trimmed ids, which
-- amortises that copy.
--
-- In this Lua every call of a C function (string.sub, table.concat...) costs
-- several compares' worth, so the merge makes few calls: a search starts
-- from the entry it knows, and the merged part is built with `..`. A lone
-- id is its own first and last id.
--
-- Ids compare as Lua strings, by the server's collation: bytewise under the
-- C locales (C, C.UTF-8, POSIX), which page.lua and remove.lua rely on too.

local max_length = tonumber(ARGV[1])
local limit = (max_length + tonumber(ARGV[2])) * 16
local floor = ARGV[3]
local ttl = tonumber(ARGV[4])
local shared = #ARGV == 5
local sub, call = string.sub, redis.call
-- The tail read first is the last 8 entries: one GETRANGE serves appends
-- and near inserts. Its bounds are strings: redis.call formats a number
-- with snprintf, which costs about as much as a small command.
local TAIL_START, END = '-128', '-1'

-- Expire the key ttl after the newest entry, the id ending `ids`.
local function expire(key, ids)
  if ttl then
    local hi, lo = struct.unpack('>I2I4', ids, #ids - 15)
    call('PEXPIREAT', key, string.format('%.0f', hi * 4294967296 + lo + ttl))
  end
end

-- The first entry of s in [lo, hi) (0-based) that is not below id, or hi;
-- and that entry when it was read here or is given (`above`: the entry at
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

-- lower_bound in [0, hi), probing back from hi by steps of 1, 1, 2, 4...
-- first: an answer d entries below hi costs O(log d) reads.
local function lower_bound_back(s, id, hi, above)
  local lo, step, next_step = 0, 1, 1
  while hi - step >= lo do
    local probe = hi - step
    local e = sub(s, probe * 16 + 1, probe * 16 + 16)
    if e < id then
      lo = probe + 1
      break
    end
    hi, above, step, next_step = probe, e, next_step, next_step * 2
  end
  if lo == hi then return lo, above end
  return lower_bound(s, id, lo, hi, above)
end

-- lower_bound in [lo, hi), probing forward from lo likewise.
local function lower_bound_forward(s, id, lo, hi)
  local step, next_step, above = 0, 1, nil
  while lo + step < hi do
    local probe = lo + step
    local e = sub(s, probe * 16 + 1, probe * 16 + 16)
    if e >= id then
      hi, above = probe, e
      break
    end
    lo, step, next_step = probe + 1, next_step, next_step * 2
  end
  if lo == hi then return lo, above end
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
  local v = call('GETRANGE', key, -max_length * 16, END)
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

-- Merge ids[first..] (the first one is given) into tail[start..span),
-- given the entry at start (nil at span): the merged part and how many ids
-- it adds. `entry` stays the entry at i, the next one to copy, so a run of
-- one entry, or the last one, needs no string.sub.
local function merge(tail, span, ids, first, id, start, entry)
  local out, parts, added, i = '', nil, 0, start
  for j = first, #ids / 16 - 1 do
    if j > first then id = sub(ids, j * 16 + 1, j * 16 + 16) end
    local run = ''
    if entry and entry < id then
      -- Copy the entries below id, up to its place, as one run.
      local passed, k = entry, nil
      k, entry = lower_bound_forward(tail, id, i + 1, span)
      if k == i + 1 then run = passed else run = sub(tail, i * 16 + 1, k * 16) end
      i = k
    end
    if entry == id then
      out = out .. run
    else
      out = out .. run .. id
      added = added + 1
    end
    if #out > 1024 then
      -- Appending to a long string copies it: a big merge goes in parts.
      parts = parts or {}
      parts[#parts + 1], out = out, ''
    end
  end
  if i == span - 1 then
    out = out .. entry
  elseif i < span then
    out = out .. sub(tail, i * 16 + 1)
  end
  if parts then
    parts[#parts + 1] = out
    out = table.concat(parts)
  end
  return out, added
end

-- Insert ids, the oldest `low` not newer than the newest entry `last`,
-- given the last entries `tail`.
local function splice(key, ids, low, tail, last)
  local n = call('STRLEN', key) / 16
  local visible = max_length
  if n < visible then visible = n end
  local span = #tail / 16
  if span > visible then
    -- A small cap: the tail read reaches into the trimmed entries.
    tail, span = sub(tail, -visible * 16), visible
  end
  -- Where the oldest id goes (last, the entry at span - 1, is not below it);
  -- while that is the start of the suffix read, read a longer one and look
  -- below what was read before.
  local start, entry = lower_bound_back(tail, low, span - 1, last)
  while start == 0 and span < visible do
    local read = span
    span = math.min(span * 4, visible)
    tail = call('GETRANGE', key, (n - span) * 16, END)
    start, entry = lower_bound_back(tail, low, span - read, entry)
  end
  local first = 0
  if start == 0 and span == max_length then
    -- Ids below a full feed's visible entries would be trimmed at once.
    first = lower_bound(ids, sub(tail, 1, 16), 0, #ids / 16)
    if first * 16 == #ids then return end
    low = sub(ids, first * 16 + 1, first * 16 + 16)
    if low > last then
      start, entry = span, nil
    else
      start, entry = lower_bound_back(tail, low, span - 1, last)
    end
  end
  local merged, added = merge(tail, span, ids, first, low, start, entry)
  if added == 0 then return end
  call('SETRANGE', key, (n - span + start) * 16, merged)
  if (n + added) * 16 > limit then compact(key) end
  if ttl and sub(ids, -16) > last then expire(key, ids) end
end

local function insert(key, ids)
  if ids == '' then return end
  local tail = call('GETRANGE', key, TAIL_START, END)
  local last = sub(tail, -16)
  local low = ids
  if #ids > 16 then low = sub(ids, 1, 16) end
  if tail == '' or low > last then
    append(key, ids)
  else
    splice(key, ids, low, tail, last)
  end
end

if shared then
  local ids = usable(ARGV[5])
  for _, key in ipairs(KEYS) do insert(key, ids) end
else
  for i, key in ipairs(KEYS) do insert(key, usable(ARGV[4 + i])) end
end
return #KEYS
