-- Shared by the group scripts (prepended to each when it is loaded).
--
-- An aggregated feed F (its key, KEYS[i], is `<ns>:agg:{F}`) is:
--   <F key>              sorted set, every score 0, one member per group:
--                        16-byte id of its newest activity .. group key, so
--                        lexicographic order is the feed's order and a
--                        cursor is a lex range
--   <F key>:r            hash: 'g'..key -> the group's record;
--                        'unseen', 'unread' -> counts of such groups
--   <F key>:m:<key>      string: the group's member ids, 16 bytes each,
--                        ascending (every member, so counts are exact and a
--                        repeated delivery is recognised)
--   <F key>:a:<key>      HyperLogLog of actor tags, once a group has more
--                        distinct actors than a record counts exactly
-- All of a feed's keys share its hash tag, so they live in one Cluster slot.
--
-- Record: byte 1 flags (1 seen, 2 read; read implies seen), byte 2 the
-- number of actors counted exactly (255: counted by the HyperLogLog), then
-- per actor its 8-byte tag and a 4-byte count of its activities here.

local SEEN, READ, SKETCH = 1, 2, 255

local function unseen(flags) return flags % 2 == 0 end
local function unread(flags) return flags < READ end

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
local function drop_group(zkey, rkey, gk, zmember)
  local rec = redis.call('HGET', rkey, 'g' .. gk)
  if rec then
    local flags = string.byte(rec, 1)
    if unseen(flags) then redis.call('HINCRBY', rkey, 'unseen', -1) end
    if unread(flags) then redis.call('HINCRBY', rkey, 'unread', -1) end
    redis.call('HDEL', rkey, 'g' .. gk)
  end
  redis.call('DEL', zkey .. ':m:' .. gk, zkey .. ':a:' .. gk)
  redis.call('ZREM', zkey, zmember)
end
