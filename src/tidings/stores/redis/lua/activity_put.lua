-- Cache activities, each only over an older version of itself.
--
-- KEYS      activity keys (<namespace>:act:<16-byte id>)
-- ARGV[1]   lifetime, ms
-- ARGV[2..] per key, its value: the activity's version (8 bytes, big-endian,
--           below 2^56, so the first byte is 0), then its JSON
--
-- An update caches the version it committed, and a read that missed the
-- cache refills it with the version it read from the canonical store. The
-- two race: whichever arrives last must not undo a newer version. A value
-- whose first byte is not 0 is bare JSON cached before versions: older than
-- any. Every entry written expires, so one nobody rewrites (a removed
-- activity refilled by a read that raced with the removal) goes away too.

local ttl = ARGV[1]
for i, key in ipairs(KEYS) do
  local value = ARGV[i + 1]
  local held = redis.call('GETRANGE', key, 0, 7)
  local newer = string.byte(held, 1) ~= 0
  if not newer then
    -- Two 32-bit halves: Lua numbers are doubles.
    local hi, lo = struct.unpack('>I4I4', held)
    local new_hi, new_lo = struct.unpack('>I4I4', value)
    newer = new_hi > hi or (new_hi == hi and new_lo > lo)
  end
  if newer then redis.call('SET', key, value, 'PX', ttl) end
end
return 0
