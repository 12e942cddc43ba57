package service

import (
	"errors"
	"sync"
	"time"

	"capblock/internal/store"
)

// accountTTL is the longest a replica answers from what it cached of a
// token, a quota or a budget. A change made through any replica reaches
// the others' caches sooner, through the watch (see follow); the age
// bound only limits what a lost notice could cost.
const accountTTL = 10 * time.Second

// maxCachedAccounts bounds the cache; past it, it starts over.
const maxCachedAccounts = 10_000

// accountCache keeps what every request reads of accounts, a token with
// its user and a team's quotas and budget, so that requests do not read
// them from the database each time.
type accountCache struct {
	mu sync.Mutex
	// gen counts the times the cache was emptied: a read that started
	// before one does not store what it found.
	gen     uint64
	entries map[string]cachedAccount
}

type cachedAccount struct {
	value any
	err   error // store.ErrNotFound, when that is what the read found
	at    time.Time
}

// forget empties the cache: tokens, quotas or budgets changed.
func (c *accountCache) forget() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	c.entries = nil
}

// cachedRead returns what load returns for key, from the cache when it
// holds a fresh answer. Answers that are not-found are kept too when
// keepNotFound is set; other errors never are.
func cachedRead[T any](c *accountCache, key string, keepNotFound bool, load func() (T, error)) (T, error) {
	now := time.Now()
	c.mu.Lock()
	e, ok := c.entries[key]
	gen := c.gen
	c.mu.Unlock()
	if ok && now.Sub(e.at) < accountTTL {
		if e.err != nil {
			var zero T
			return zero, e.err
		}
		return e.value.(T), nil
	}
	v, err := load()
	if err != nil && !(keepNotFound && errors.Is(err, store.ErrNotFound)) {
		return v, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen == gen {
		if c.entries == nil || len(c.entries) >= maxCachedAccounts {
			c.entries = map[string]cachedAccount{}
		}
		c.entries[key] = cachedAccount{value: v, err: err, at: now}
	}
	return v, err
}
