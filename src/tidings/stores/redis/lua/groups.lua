-- Shared by the group scripts (prepended to each when it is loaded).
--
-- An aggregated feed F (its key, KEYS[i], is `<ns>:agg:{F}`) is:
--   <F key>              sorted set: member = group key, score = ms of the
--                        group's newest activity; a group moves with one ZADD
--                        and the feed's order is (score, key)
--   <F key>:r            hash: 'g'..key -> the group's record;
--                        'unseen', 'unread' -> counts of such groups
--   <F key>:m:<key>      string: the member ids of a group with more than
--                        INLINE members (below that they sit in the record)
--   <F key>:a:<key>      HyperLogLog of actor tags, once a group has more
--                        distinct actors than a record counts exactly
-- All of a feed's keys share its hash tag, so they live in one Cluster slot.
--
-- Record: byte 1 flags (1 seen, 2 read; read implies seen), byte 2 the
-- number of actors counted exactly (255: counted by the HyperLogLog), bytes
-- 3-6 the member count; then per actor its 8-byte tag and a 4-byte count of
-- its activities here; then, while count <= INLINE, the member ids.
-- Member ids are 16 bytes, ascending: every member is kept, so counts stay
-- exact and a repeated delivery is recognised and changes nothing.
--
-- A small group is one hash field: joining it costs HGET, HSET and (if it
-- becomes the newest) ZADD. A large group's ids get their own key, where a
-- new newest id is an O(1) APPEND instead of a copy of the record.

local SEEN, READ, SKETCH = 1, 2, 255
local INLINE = 64
local ONE = struct.pack('>I4', 1)

local function unseen(flags) return flags % 2 == 0 end
local function unread(flags) return flags < READ end

local function ms(id)
  local hi, lo = struct.unpack('>I2I4', id)
  return hi * 4294967296 + lo
end

local function header(flags, nact, count)
  return string.char(flags, nact) .. struct.pack('>I4', count)
end

-- flags, exact actor count (or SKETCH), member count, end of the actor section.
local function parse(rec)
  local flags, nact = string.byte(rec, 1, 2)
  local count = struct.unpack('>I4', rec, 3)
  local aend = 6
  if nact ~= SKETCH then aend = 6 + nact * 12 end
  return flags, nact, count, aend
end

-- Every member id of a group, ascending.
local function ids_of(rec, mkey)
  local _, _, count, aend = parse(rec)
  if count <= INLINE then return string.sub(rec, aend + 1) end
  return redis.call('GET', mkey) or ''
end

-- Position of `id` in the sorted id string v: (index of the first entry >= id, found).
local function search(v, id)
  local lo, hi = 0, #v / 16
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if string.sub(v, mid * 16 + 1, mid * 16 + 16) < id then lo = mid + 1 else hi = mid end
  end
  return lo, string.sub(v, lo * 16 + 1, lo * 16 + 16) == id
end

-- Remove a whole group, keeping the feed's counts exact.
local function drop_group(zkey, rkey, gk)
  local rec = redis.call('HGET', rkey, 'g' .. gk)
  if rec then
    local flags = string.byte(rec, 1)
    if unseen(flags) then redis.call('HINCRBY', rkey, 'unseen', -1) end
    if unread(flags) then redis.call('HINCRBY', rkey, 'unread', -1) end
    redis.call('HDEL', rkey, 'g' .. gk)
  end
  redis.call('DEL', zkey .. ':m:' .. gk, zkey .. ':a:' .. gk)
  redis.call('ZREM', zkey, gk)
end
