-- Read a page of groups (layout: groups.lua).
--
-- KEYS[1] feed key
-- ARGV[1] limit   ARGV[2] ids shown per group
-- ARGV[3] snapshot: 16-byte id, or '' for a first page (the snapshot is then
--         the newest id in the feed)
-- ARGV[4] after: the last position returned (16-byte id .. group key), or ''
-- ARGV[5] activity key prefix, or '' not to fetch activities
-- Returns {snapshot, unseen, unread, number of groups, then per group: position, flags, count,
-- actor count, shown ids (ascending, concatenated), oldest id; then the shown
-- activities' JSON in the same order (false where missing) when ARGV[5] is given}.
--
-- Paging walks the snapshot: a group that gained members after it (its
-- sorted-set entry is above the snapshot) is placed at its newest member not
-- after the snapshot, so a reader paging while groups move neither skips nor
-- repeats one. The activity keys are not declared: single server only; on a
-- cluster the caller passes '' and reads activities with MGET.

local zkey = KEYS[1]
local rkey = zkey .. ':r'
local limit = tonumber(ARGV[1])
local shown = tonumber(ARGV[2])
local snapshot = ARGV[3]
local after = ARGV[4]
local prefix = ARGV[5]

local counts = redis.call('HMGET', rkey, 'unseen', 'unread')
local placed
if snapshot == '' then
  placed = redis.call('ZREVRANGE', zkey, 0, limit - 1)
  if #placed == 0 then return {'', 0, 0, 0} end
  snapshot = string.sub(placed[1], 1, 16)
else
  local top = '+'
  if after ~= '' then top = '(' .. after end
  placed = redis.call('ZREVRANGEBYLEX', zkey, top, '-', 'LIMIT', 0, limit)
  -- Groups that moved above the snapshot: where did each stand then?
  local moved = redis.call('ZRANGEBYLEX', zkey, '(' .. snapshot .. '\255', '+')
  if #moved > 0 then
    for _, zmember in ipairs(moved) do
      local gk = string.sub(zmember, 17)
      local v = redis.call('GET', zkey .. ':m:' .. gk)
      local at, found = search(v, snapshot)
      if found then at = at + 1 end
      if at > 0 then
        local position = string.sub(v, at * 16 - 15, at * 16) .. gk
        if after == '' or position < after then placed[#placed + 1] = position end
      end
    end
    table.sort(placed, function(a, b) return a > b end)
    for i = #placed, limit + 1, -1 do placed[i] = nil end
  end
end

local out = {snapshot, tonumber(counts[1] or 0), tonumber(counts[2] or 0), #placed}
local keys = {}
for _, position in ipairs(placed) do
  local gk = string.sub(position, 17)
  local mkey = zkey .. ':m:' .. gk
  local rec = redis.call('HGET', rkey, 'g' .. gk)
  local count = redis.call('STRLEN', mkey) / 16
  local n = math.min(count, shown)
  local ids = redis.call('GETRANGE', mkey, -16 * n, -1)
  local actors = string.byte(rec, 2)
  if actors == SKETCH then actors = redis.call('PFCOUNT', zkey .. ':a:' .. gk) end
  out[#out + 1] = position
  out[#out + 1] = string.byte(rec, 1)
  out[#out + 1] = count
  out[#out + 1] = actors
  out[#out + 1] = ids
  out[#out + 1] = redis.call('GETRANGE', mkey, 0, 15)
  if prefix ~= '' then
    for i = n - 1, 0, -1 do keys[#keys + 1] = prefix .. string.sub(ids, i * 16 + 1, i * 16 + 16) end
  end
end
if #keys > 0 then
  for _, doc in ipairs(redis.call('MGET', unpack(keys))) do out[#out + 1] = doc end
end
return out
