-- Members join their groups in many aggregated feeds (layout: groups.lua).
--
-- KEYS: feed keys   ARGV[1] max_length (groups per feed)
-- ARGV[2] distinct actors counted exactly per group
-- ARGV[3..] per member: 16-byte id, group key, 8-byte actor tag
--
-- One script call writes a whole chunk of follower feeds, and nothing is
-- read-modify-written from the client, so concurrent writers can never split
-- a group or lose a count.

local max_length = tonumber(ARGV[1])
local exact = tonumber(ARGV[2])

-- One more activity of `tag`: the new (exact actor count, actor section).
local function add_actor(nact, actors, tag, akey)
  if nact == SKETCH then
    redis.call('PFADD', akey, tag)
    return nact, actors
  end
  -- A plain find, then a check that the match starts an entry (tags are 12 bytes apart).
  local at = string.find(actors, tag, 1, true)
  while at do
    if at % 12 == 1 then
      local count = struct.unpack('>I4', actors, at + 8)
      return nact, string.sub(actors, 1, at + 7) .. struct.pack('>I4', count + 1) .. string.sub(actors, at + 12)
    end
    at = string.find(actors, tag, at + 1, true)
  end
  if nact < exact then return nact + 1, actors .. tag .. ONE end
  local tags = { tag }
  for at = 1, nact * 12, 12 do tags[#tags + 1] = string.sub(actors, at, at + 7) end
  redis.call('PFADD', akey, unpack(tags))
  return SKETCH, ''
end

-- Insert id into sorted ids: (new ids or nil when held already, whether it is the new newest).
local function insert(ids, id)
  local last = string.sub(ids, -16)
  if id > last then return ids .. id, true end
  if id == last then return nil, false end
  local at, found = search(ids, id)
  if found then return nil, false end
  return string.sub(ids, 1, at * 16) .. id .. string.sub(ids, at * 16 + 1), false
end

-- The same, for a group whose ids have their own key.
local function insert_spilled(mkey, id)
  local last = redis.call('GETRANGE', mkey, -16, -1)
  if id > last then
    redis.call('APPEND', mkey, id)
    return true, true
  end
  if id == last then return false, false end
  local ids, newest = insert(redis.call('GET', mkey), id)
  if not ids then return false, false end
  redis.call('SET', mkey, ids)
  return true, newest
end

-- The common case, done with as few string copies as possible: a new newest
-- activity of an actor the group has, into a group whose ids are inline.
-- Returns false (having changed nothing) when the case does not apply.
local function join_newest(rkey, zkey, field, rec, m)
  local flags, nact = string.byte(rec, 1, 2)
  local count = struct.unpack('>I4', rec, 3)
  if count >= INLINE or nact == SKETCH or m[1] <= string.sub(rec, -16) then return false end
  local aend = 6 + nact * 12
  local at = string.find(rec, m[3], 7, true)
  while at and at <= aend and (at - 7) % 12 ~= 0 do at = string.find(rec, m[3], at + 1, true) end
  if not at or at > aend then return false end
  local n = struct.unpack('>I4', rec, at + 8)
  redis.call('HSET', rkey, field, string.char(0, nact) .. struct.pack('>I4', count + 1)
    .. string.sub(rec, 7, at + 7) .. struct.pack('>I4', n + 1) .. string.sub(rec, at + 12) .. m[1])
  if not unseen(flags) then redis.call('HINCRBY', rkey, 'unseen', 1) end
  if not unread(flags) then redis.call('HINCRBY', rkey, 'unread', 1) end
  redis.call('ZADD', zkey, m[5], m[2])
  return true
end

-- Per member, computed once for every feed: id, group key, actor tag, hash field, ms.
local members = {}
for i = 3, #ARGV, 3 do
  members[#members + 1] = {ARGV[i], ARGV[i + 1], ARGV[i + 2], 'g' .. ARGV[i + 1], ms(ARGV[i])}
end

for _, zkey in ipairs(KEYS) do
  local rkey = zkey .. ':r'
  local created = false
  for _, m in ipairs(members) do
    local id, gk, tag, field = m[1], m[2], m[3], m[4]
    local rec = redis.call('HGET', rkey, field)
    if not rec then
      redis.call('HSET', rkey, field, header(0, 1, 1) .. tag .. ONE .. id)
      redis.call('ZADD', zkey, m[5], gk)
      redis.call('HINCRBY', rkey, 'unseen', 1)
      redis.call('HINCRBY', rkey, 'unread', 1)
      created = true
    elseif not join_newest(rkey, zkey, field, rec, m) then
      local flags, nact, count, aend = parse(rec)
      local added, newest, ids = false, false, ''
      if count <= INLINE then
        local grown
        grown, newest = insert(string.sub(rec, aend + 1), id)
        if grown then
          added = true
          if count + 1 > INLINE then
            redis.call('SET', zkey .. ':m:' .. gk, grown)
          else
            ids = grown
          end
        end
      else
        added, newest = insert_spilled(zkey .. ':m:' .. gk, id)
      end
      if added then
        local actors
        nact, actors = add_actor(nact, string.sub(rec, 7, aend), tag, zkey .. ':a:' .. gk)
        -- A new activity makes a seen or read group new again.
        if not unseen(flags) then redis.call('HINCRBY', rkey, 'unseen', 1) end
        if not unread(flags) then redis.call('HINCRBY', rkey, 'unread', 1) end
        redis.call('HSET', rkey, field, header(0, nact, count + 1) .. actors .. ids)
        if newest then redis.call('ZADD', zkey, m[5], gk) end
      end
    end
  end
  if created then
    local excess = redis.call('ZCARD', zkey) - max_length
    if excess > 0 then
      for _, gk in ipairs(redis.call('ZRANGE', zkey, 0, excess - 1)) do drop_group(zkey, rkey, gk) end
    end
  end
end
return #KEYS
