package remote

import "sync"

// nonceCache remembers accepted nonces until their expiry, a Unix-millisecond time.
// Invariants: seen and the min-heap byExpiry hold the same nonces; len(seen) never
// exceeds capacity; an entry leaves only once its expiry is before now.
type nonceCache struct {
	mu       sync.Mutex
	capacity int
	seen     map[[16]byte]struct{}
	byExpiry []nonceEntry // min-heap on expiry
}

type nonceEntry struct {
	expiry int64
	nonce  [16]byte
}

func newNonceCache(capacity int) *nonceCache {
	return &nonceCache{capacity: capacity, seen: make(map[[16]byte]struct{})}
}

// add records nonce until expiry. It returns ErrReplayed if nonce is remembered, and
// ErrNonceCacheFull if capacity unexpired nonces are, after evicting those whose expiry
// is before now.
func (c *nonceCache) add(nonce [16]byte, expiry, now int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.byExpiry) > 0 && c.byExpiry[0].expiry < now {
		delete(c.seen, c.byExpiry[0].nonce)
		c.pop()
	}
	if _, ok := c.seen[nonce]; ok {
		return ErrReplayed
	}
	if len(c.seen) >= c.capacity {
		return ErrNonceCacheFull
	}
	c.seen[nonce] = struct{}{}
	c.push(nonceEntry{expiry: expiry, nonce: nonce})
	return nil
}

// len reports how many nonces are remembered.
func (c *nonceCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.seen)
}

func (c *nonceCache) push(e nonceEntry) {
	h := append(c.byExpiry, e)
	for i := len(h) - 1; i > 0; {
		parent := (i - 1) / 2
		if h[parent].expiry <= h[i].expiry {
			break
		}
		h[parent], h[i] = h[i], h[parent]
		i = parent
	}
	c.byExpiry = h
}

func (c *nonceCache) pop() {
	h := c.byExpiry
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	for i := 0; ; {
		small, l, r := i, 2*i+1, 2*i+2
		if l < len(h) && h[l].expiry < h[small].expiry {
			small = l
		}
		if r < len(h) && h[r].expiry < h[small].expiry {
			small = r
		}
		if small == i {
			break
		}
		h[i], h[small] = h[small], h[i]
		i = small
	}
	c.byExpiry = h
}
