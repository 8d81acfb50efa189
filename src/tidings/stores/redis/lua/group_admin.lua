-- Whole-feed operations on aggregated feeds (layout: groups.lua).
--
-- KEYS[1] feed key
-- ARGV[1] 'seen' | 'read': mark the groups named in ARGV[2..] (none: all)
--         'ids': every member id of the feed, concatenated
--         'clear': delete the feed
-- Marking read marks seen too; the feed's counts follow each change.

local zkey = KEYS[1]
local rkey = zkey .. ':r'
local op = ARGV[1]

if op == 'ids' then
  local parts = {}
  for _, gk in ipairs(redis.call('ZRANGE', zkey, 0, -1)) do
    local rec = redis.call('HGET', rkey, 'g' .. gk)
    if rec then parts[#parts + 1] = ids_of(rec, zkey .. ':m:' .. gk) end
  end
  return table.concat(parts)
end

if op == 'clear' then
  for _, gk in ipairs(redis.call('ZRANGE', zkey, 0, -1)) do
    redis.call('DEL', zkey .. ':m:' .. gk, zkey .. ':a:' .. gk)
  end
  redis.call('DEL', zkey, rkey)
  return 0
end

local read = op == 'read'
local groups = {}
if #ARGV > 1 then
  for i = 2, #ARGV do groups[#groups + 1] = ARGV[i] end
else
  groups = redis.call('ZRANGE', zkey, 0, -1)
end
local changed = 0
for _, gk in ipairs(groups) do
  local field = 'g' .. gk
  local rec = redis.call('HGET', rkey, field)
  if rec then
    local flags = string.byte(rec, 1)
    local marked = SEEN
    if read or flags >= READ then marked = SEEN + READ end
    if marked ~= flags then
      if unseen(flags) then redis.call('HINCRBY', rkey, 'unseen', -1) end
      if read and unread(flags) then redis.call('HINCRBY', rkey, 'unread', -1) end
      redis.call('HSET', rkey, field, string.char(marked) .. string.sub(rec, 2))
      changed = changed + 1
    end
  end
end
return changed
