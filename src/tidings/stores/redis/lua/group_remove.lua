-- Take members out of their groups in many aggregated feeds (layout: groups.lua).
--
-- KEYS: feed keys   ARGV[1..] per member: 16-byte id, group key, 8-byte actor tag
-- A group left empty disappears; one that lost its newest member moves down.
-- Past the exact actor bound the HyperLogLog cannot forget an actor, so the
-- estimate stays as it was.

-- One activity of `tag` less: the new (exact actor count, actor section).
local function remove_actor(nact, actors, tag)
  if nact == SKETCH then return nact, actors end
  for at = 1, nact * 12, 12 do
    if string.sub(actors, at, at + 7) == tag then
      local count = struct.unpack('>I4', actors, at + 8)
      if count > 1 then
        return nact, string.sub(actors, 1, at + 7) .. struct.pack('>I4', count - 1) .. string.sub(actors, at + 12)
      end
      return nact - 1, string.sub(actors, 1, at - 1) .. string.sub(actors, at + 12)
    end
  end
  return nact, actors
end

local removed = 0
for _, zkey in ipairs(KEYS) do
  local rkey = zkey .. ':r'
  for i = 1, #ARGV, 3 do
    local id, gk, tag = ARGV[i], ARGV[i + 1], ARGV[i + 2]
    local field = 'g' .. gk
    local mkey = zkey .. ':m:' .. gk
    local rec = redis.call('HGET', rkey, field)
    if rec then
      local flags, nact, count, aend = parse(rec)
      local ids = ids_of(rec, mkey)
      local at, found = search(ids, id)
      if found then
        removed = removed + 1
        if count == 1 then
          drop_group(zkey, rkey, gk)
        else
          local rest = string.sub(ids, 1, at * 16) .. string.sub(ids, at * 16 + 17)
          local actors
          nact, actors = remove_actor(nact, string.sub(rec, 7, aend), tag)
          if count - 1 <= INLINE then
            if count > INLINE then redis.call('DEL', mkey) end
            redis.call('HSET', rkey, field, header(flags, nact, count - 1) .. actors .. rest)
          else
            redis.call('SET', mkey, rest)
            redis.call('HSET', rkey, field, header(flags, nact, count - 1) .. actors)
          end
          if at == count - 1 then redis.call('ZADD', zkey, ms(string.sub(rest, -16)), gk) end
        end
      end
    end
  end
  if redis.call('ZCARD', zkey) == 0 then redis.call('DEL', rkey) end
end
return removed
