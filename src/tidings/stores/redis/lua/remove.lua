-- Remove ids from feeds (see add.lua for the value layout).
--
-- KEYS: feed keys   ARGV[1] max_length   ARGV[2..] 16-byte ids, any order
-- Trimmed entries are dropped in the same rewrite, so removing a visible
-- entry never brings back one the cap removed. An emptied feed is deleted.

local max_length = tonumber(ARGV[1])
local drop = {}
for i = 2, #ARGV do drop[ARGV[i]] = true end

local removed = 0
for _, key in ipairs(KEYS) do
  local v = redis.call('GET', key)
  if v then
    local n = #v / 16
    local first = n - max_length
    if first < 0 then first = 0 end
    local kept = {}
    for i = first, n - 1 do
      local e = string.sub(v, i * 16 + 1, i * 16 + 16)
      if drop[e] then removed = removed + 1 else kept[#kept + 1] = e end
    end
    if #kept == 0 then
      redis.call('DEL', key)
    elseif #kept < n then
      redis.call('SET', key, table.concat(kept), 'KEEPTTL')
    end
  end
end
return removed
