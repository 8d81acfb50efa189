-- Members join their groups in many aggregated feeds (layout: groups.lua).
--
-- KEYS: feed keys   ARGV[1] max_length (groups per feed)
-- ARGV[2] distinct actors counted exactly per group
-- ARGV[3..] per member: 16-byte id, group key, 8-byte actor tag
--
-- All in one script call per chunk of feeds: a joining member is a few O(1)
-- commands (read the group's record and newest id, APPEND, move the group in
-- the sorted set, write the record), with no read-modify-write from the
-- client, so concurrent writers can never split a group or lose a count.

local max_length = tonumber(ARGV[1])
local exact = tonumber(ARGV[2])

-- Count one more activity of `tag` in the record.
local function add_actor(rec, tag, akey)
  local n = string.byte(rec, 2)
  if n == SKETCH then
    redis.call('PFADD', akey, tag)
    return rec
  end
  for i = 0, n - 1 do
    local at = 3 + i * 12
    if string.sub(rec, at, at + 7) == tag then
      local count = struct.unpack('>I4', rec, at + 8)
      return string.sub(rec, 1, at + 7) .. struct.pack('>I4', count + 1) .. string.sub(rec, at + 12)
    end
  end
  if n < exact then
    return string.sub(rec, 1, 1) .. string.char(n + 1) .. string.sub(rec, 3) .. tag .. struct.pack('>I4', 1)
  end
  local tags = { tag }
  for i = 0, n - 1 do tags[#tags + 1] = string.sub(rec, 3 + i * 12, 10 + i * 12) end
  redis.call('PFADD', akey, unpack(tags))
  return string.sub(rec, 1, 1) .. string.char(SKETCH)
end

-- Insert id into the group's id string: 0 held already, 1 inserted, 2 appended (new newest).
local function insert(mkey, id, last)
  if id > last then
    redis.call('APPEND', mkey, id)
    return 2
  end
  if id == last then return 0 end
  local v = redis.call('GET', mkey)
  local at, found = search(v, id)
  if found then return 0 end
  redis.call('SET', mkey, string.sub(v, 1, at * 16) .. id .. string.sub(v, at * 16 + 1))
  return 1
end

for _, zkey in ipairs(KEYS) do
  local rkey = zkey .. ':r'
  local created = false
  for i = 3, #ARGV, 3 do
    local id, gk, tag = ARGV[i], ARGV[i + 1], ARGV[i + 2]
    local field = 'g' .. gk
    local mkey = zkey .. ':m:' .. gk
    local rec = redis.call('HGET', rkey, field)
    if not rec then
      redis.call('SET', mkey, id)
      redis.call('HSET', rkey, field, string.char(0, 1) .. tag .. struct.pack('>I4', 1))
      redis.call('ZADD', zkey, 0, id .. gk)
      redis.call('HINCRBY', rkey, 'unseen', 1)
      redis.call('HINCRBY', rkey, 'unread', 1)
      created = true
    else
      local last = redis.call('GETRANGE', mkey, -16, -1)
      local where = insert(mkey, id, last)
      if where > 0 then
        if where == 2 then
          redis.call('ZREM', zkey, last .. gk)
          redis.call('ZADD', zkey, 0, id .. gk)
        end
        local flags = string.byte(rec, 1)
        rec = add_actor(rec, tag, zkey .. ':a:' .. gk)
        if flags ~= 0 then
          -- A new activity makes a seen or read group new again.
          if not unseen(flags) then redis.call('HINCRBY', rkey, 'unseen', 1) end
          if not unread(flags) then redis.call('HINCRBY', rkey, 'unread', 1) end
          rec = string.char(0) .. string.sub(rec, 2)
        end
        redis.call('HSET', rkey, field, rec)
      end
    end
  end
  if created then
    local excess = redis.call('ZCARD', zkey) - max_length
    if excess > 0 then
      for _, zmember in ipairs(redis.call('ZRANGE', zkey, 0, excess - 1)) do
        drop_group(zkey, rkey, string.sub(zmember, 17), zmember)
      end
    end
  end
end
return #KEYS
