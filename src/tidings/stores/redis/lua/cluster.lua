#!lua flags=allow-cross-slot-keys
-- Prepended to a script for Redis Cluster: the script then runs one call per
-- node over feeds in many slots of that node.
--
-- Redis refuses a call whose declared KEYS span slots, script flag or not, so
-- the keys travel in ARGV (numkeys 0): ARGV[1] the number of keys, then the
-- keys, then the script's own arguments. The flag lets the script touch keys
-- of several slots as long as they all live on the node running it; one that
-- does not (a slot moved since the caller grouped the keys) fails the call,
-- and the caller regroups and retries, which every script here allows: each
-- one is idempotent. The locals below shadow the globals for the rest of the
-- script, which is written against KEYS and ARGV as usual.

local KEYS, ARGV = (function(argv)
  local n = tonumber(argv[1])
  local keys, args = {}, {}
  for i = 2, n + 1 do keys[i - 1] = argv[i] end
  for i = n + 2, #argv do args[i - n - 1] = argv[i] end
  return keys, args
end)(ARGV)
