package redis

import goredis "github.com/redis/go-redis/v9"

// acquireScript takes the lease if nobody holds it, or confirms it if this campaign
// already holds it (an earlier attempt won, but its reply was lost).
//
//	KEYS[1] lease key, KEYS[2] epoch key
//	ARGV[1] "<id> <candidate>", ARGV[2] TTL in ms, ARGV[3] token floor
//
// It returns {1, token, value} when acquired, and {0, pttl, value, epoch} when held by
// someone else. The epoch is first raised to the floor, so the token is max(INCR, floor+1).
// A lease whose value is "<token> " .. ARGV[1] is the campaign's own: it is PEXPIREd to the
// TTL and returned as acquired, with its token.
var acquireScript = goredis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if cur then
	local sp = string.find(cur, ' ', 1, true)
	if sp and string.sub(cur, sp + 1) == ARGV[1] then
		redis.call('PEXPIRE', KEYS[1], ARGV[2])
		return {1, tonumber(string.sub(cur, 1, sp - 1)), cur}
	end
	return {0, redis.call('PTTL', KEYS[1]), cur, redis.call('GET', KEYS[2]) or '0'}
end
local epoch = tonumber(redis.call('GET', KEYS[2]) or '0')
if epoch < tonumber(ARGV[3]) then
	redis.call('SET', KEYS[2], ARGV[3])
end
local tok = redis.call('INCR', KEYS[2])
local val = string.format('%d', tok) .. ' ' .. ARGV[1]
redis.call('SET', KEYS[1], val, 'NX', 'PX', ARGV[2])
return {1, tok, val}
`)

// renewScript is compare-and-pexpire: KEYS[1] lease key, ARGV[1] the holder's value,
// ARGV[2] TTL in ms. It returns 1 if renewed, 0 if the value is not (any longer) the holder's.
var renewScript = goredis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
	return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
`)

// releaseScript is compare-and-delete: KEYS[1] lease key, ARGV[1] the holder's value,
// ARGV[2] the release channel, on which it publishes to wake the standbys. It returns 1 if
// released, 0 if the value is not (any longer) the holder's.
var releaseScript = goredis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
	redis.call('DEL', KEYS[1])
	redis.call('PUBLISH', ARGV[2], '1')
	return 1
end
return 0
`)

// leaderScript reads the lease value and its PTTL in one step: {value, pttl}, or {”, -2}.
var leaderScript = goredis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if not cur then
	return {'', -2}
end
return {cur, redis.call('PTTL', KEYS[1])}
`)
