-- Remove ids from feeds (see add.lua for the value layout).
--
-- KEYS: feed keys   ARGV: 16-byte ids to remove, any order
-- A feed left with no visible entry is deleted. Trimmed slots stay trimmed:
-- removing an entry never brings back one the cap dropped.

local HDR = 28
local drop = {}
for _, id in ipairs(ARGV) do drop[id] = true end

local removed = 0
for _, key in ipairs(KEYS) do
  local v = redis.call('GET', key)
  if v then
    local start, n, cap = struct.unpack('>I4I4I4', v)
    local kept = {}
    for i = start, n - 1 do
      local e = string.sub(v, HDR + 1 + i * 16, HDR + 16 + i * 16)
      if drop[e] then removed = removed + 1 else kept[#kept + 1] = e end
    end
    if #kept == 0 then
      redis.call('DEL', key)
    elseif #kept < n - start then
      local body = table.concat(kept)
      redis.call('SET', key, struct.pack('>I4I4I4', 0, #kept, cap) .. kept[#kept] .. body
        .. string.rep('\0', 16 * (cap - #kept)), 'KEEPTTL')
    end
  end
end
return removed
