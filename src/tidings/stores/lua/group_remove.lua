-- Take members out of their groups in many aggregated feeds (layout: groups.lua).
--
-- KEYS: feed keys   ARGV[1..] per member: 16-byte id, group key, 8-byte actor tag
-- A group left empty disappears; one that lost its newest member moves down.
-- Past the exact actor bound the HyperLogLog cannot forget an actor, so the
-- estimate stays as it was.

local function remove_actor(rec, tag)
  local n = string.byte(rec, 2)
  if n == SKETCH then return rec end
  for i = 0, n - 1 do
    local at = 3 + i * 12
    if string.sub(rec, at, at + 7) == tag then
      local count = struct.unpack('>I4', rec, at + 8)
      if count > 1 then
        return string.sub(rec, 1, at + 7) .. struct.pack('>I4', count - 1) .. string.sub(rec, at + 12)
      end
      return string.sub(rec, 1, 1) .. string.char(n - 1) .. string.sub(rec, 3, at - 1) .. string.sub(rec, at + 12)
    end
  end
  return rec
end

local removed = 0
for _, zkey in ipairs(KEYS) do
  local rkey = zkey .. ':r'
  for i = 1, #ARGV, 3 do
    local id, gk, tag = ARGV[i], ARGV[i + 1], ARGV[i + 2]
    local mkey = zkey .. ':m:' .. gk
    local v = redis.call('GET', mkey)
    if v then
      local at, found = search(v, id)
      if found then
        removed = removed + 1
        local n = #v / 16
        if n == 1 then
          drop_group(zkey, rkey, gk, id .. gk)
        else
          local rest = string.sub(v, 1, at * 16) .. string.sub(v, at * 16 + 17)
          redis.call('SET', mkey, rest)
          if at == n - 1 then
            redis.call('ZREM', zkey, id .. gk)
            redis.call('ZADD', zkey, 0, string.sub(rest, -16) .. gk)
          end
          local field = 'g' .. gk
          local rec = redis.call('HGET', rkey, field)
          if rec then redis.call('HSET', rkey, field, remove_actor(rec, tag)) end
        end
      end
    end
  end
  if redis.call('ZCARD', zkey) == 0 then redis.call('DEL', rkey) end
end
return removed
