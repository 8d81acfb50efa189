-- Read a page of groups (layout: groups.lua).
--
-- KEYS[1] feed key
-- ARGV[1] limit   ARGV[2] ids shown per group
-- ARGV[3] snapshot: 16-byte id, or '' for a first page (the snapshot is then
--         the newest id in the feed)
-- ARGV[4] after: ms of the last position returned, or ''   ARGV[5] its group key
-- ARGV[6] activity key prefix, or '' not to fetch activities
-- Returns {snapshot, unseen, unread, number of groups, then per group: key,
-- position ms, flags, count, actor count, shown ids (ascending, concatenated),
-- oldest id; then the shown activities as cached (version, then JSON:
-- activity_put.lua), newest first within each group (false where missing),
-- when ARGV[6] is given}.
--
-- A group stands at the ms of its newest member not after the snapshot. Only
-- groups scored at or above the snapshot's ms can have members after it, so
-- only those are looked at one by one; the rest stand at their score. The
-- activity keys are not declared: single server only; on a cluster the
-- caller passes '' and reads activities with MGET.

local zkey = KEYS[1]
local rkey = zkey .. ':r'
local limit = tonumber(ARGV[1])
local shown = tonumber(ARGV[2])
local snapshot = ARGV[3]
local after_ms = tonumber(ARGV[4])
local after_key = ARGV[5]
local prefix = ARGV[6]

local placed = {}  -- {ms, key}
local records = {}

local function record(gk)
  local rec = records[gk]
  if not rec then
    rec = redis.call('HGET', rkey, 'g' .. gk)
    records[gk] = rec
  end
  return rec
end

local function before_cursor(pms, gk)
  return after_ms == nil or pms < after_ms or (pms == after_ms and gk < after_key)
end

local function fmt(n) return string.format('%.0f', n) end

if snapshot == '' then
  local top = redis.call('ZREVRANGE', zkey, 0, limit - 1, 'WITHSCORES')
  if #top == 0 then return {'', 0, 0, 0} end
  for i = 1, #top, 2 do placed[#placed + 1] = {tonumber(top[i + 1]), top[i]} end
  -- The snapshot: the newest id among the groups of the newest ms.
  for _, gk in ipairs(redis.call('ZRANGEBYSCORE', zkey, top[2], top[2])) do
    local newest = string.sub(ids_of(record(gk), zkey .. ':m:' .. gk), -16)
    if newest > snapshot then snapshot = newest end
  end
else
  local s = ms(snapshot)
  -- Groups at or above the snapshot's ms: where did each stand then?
  local near = redis.call('ZRANGEBYSCORE', zkey, fmt(s), '+inf')
  for _, gk in ipairs(near) do
    local ids = ids_of(record(gk), zkey .. ':m:' .. gk)
    local at, found = search(ids, snapshot)
    if found then at = at + 1 end
    if at > 0 then
      local pms = ms(string.sub(ids, at * 16 - 15, at * 16))
      if before_cursor(pms, gk) then placed[#placed + 1] = {pms, gk} end
    end
  end
  -- Groups below it stand at their score.
  local top = s
  if after_ms ~= nil and after_ms < s then
    for _, gk in ipairs(redis.call('ZRANGEBYSCORE', zkey, fmt(after_ms), fmt(after_ms))) do
      if gk < after_key then placed[#placed + 1] = {after_ms, gk} end
    end
    top = after_ms
  end
  local below = redis.call('ZREVRANGEBYSCORE', zkey, '(' .. fmt(top), '-inf', 'WITHSCORES', 'LIMIT', 0, limit)
  for i = 1, #below, 2 do placed[#placed + 1] = {tonumber(below[i + 1]), below[i]} end
  table.sort(placed, function(a, b) return a[1] > b[1] or (a[1] == b[1] and a[2] > b[2]) end)
  for i = #placed, limit + 1, -1 do placed[i] = nil end
end

local counts = redis.call('HMGET', rkey, 'unseen', 'unread')
local out = {snapshot, tonumber(counts[1] or 0), tonumber(counts[2] or 0), #placed}
local keys = {}
for _, p in ipairs(placed) do
  local gk = p[2]
  local rec = record(gk)
  local flags, nact, count = parse(rec)
  local ids = ids_of(rec, zkey .. ':m:' .. gk)
  local n = math.min(count, shown)
  local newest = string.sub(ids, -16 * n)
  if nact == SKETCH then nact = redis.call('PFCOUNT', zkey .. ':a:' .. gk) end
  out[#out + 1] = gk
  out[#out + 1] = p[1]
  out[#out + 1] = flags
  out[#out + 1] = count
  out[#out + 1] = nact
  out[#out + 1] = newest
  out[#out + 1] = string.sub(ids, 1, 16)
  if prefix ~= '' then
    for i = n - 1, 0, -1 do keys[#keys + 1] = prefix .. string.sub(newest, i * 16 + 1, i * 16 + 16) end
  end
end
if #keys > 0 then
  for _, doc in ipairs(redis.call('MGET', unpack(keys))) do out[#out + 1] = doc end
end
return out
