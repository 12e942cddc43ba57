package service

import (
	"errors"
	"fmt"
	"testing"

	"capblock/internal/store"
)

// TestAccountCache reads through the cache: a fresh answer is reused,
// not-found is kept only when asked, other errors never, and forget drops
// everything, including what a read that began before it found.
func TestAccountCache(t *testing.T) {
	var c accountCache
	reads := 0
	load := func(v string, err error) func() (string, error) {
		return func() (string, error) { reads++; return v, err }
	}
	read := func(key string, keepNotFound bool, fn func() (string, error)) (string, error) {
		t.Helper()
		return cachedRead(&c, key, keepNotFound, fn)
	}

	if v, err := read("a", false, load("one", nil)); v != "one" || err != nil || reads != 1 {
		t.Fatalf("first read: %q, %v after %d reads", v, err, reads)
	}
	if v, err := read("a", false, load("two", nil)); v != "one" || err != nil || reads != 1 {
		t.Fatalf("cached read: %q, %v after %d reads, want the cached one", v, err, reads)
	}

	notFound := fmt.Errorf("budget: %w", store.ErrNotFound)
	read("b", true, load("", notFound))
	if _, err := read("b", true, load("found", nil)); !errors.Is(err, store.ErrNotFound) || reads != 2 {
		t.Fatalf("kept not-found: %v after %d reads", err, reads)
	}
	read("c", false, load("", notFound))
	if v, _ := read("c", false, load("found", nil)); v != "found" || reads != 4 {
		t.Fatalf("not-found not kept: %q after %d reads", v, reads)
	}
	read("d", true, load("", errors.New("connection reset")))
	if v, _ := read("d", true, load("found", nil)); v != "found" || reads != 6 {
		t.Fatalf("an error is never kept: %q after %d reads", v, reads)
	}

	c.forget()
	if v, _ := read("a", false, load("three", nil)); v != "three" || reads != 7 {
		t.Fatalf("after forget: %q after %d reads", v, reads)
	}

	// A read that began before a forget does not store what it found.
	stale := func() (string, error) { c.forget(); return "stale", nil }
	if v, _ := read("e", false, stale); v != "stale" {
		t.Fatalf("racing read returned %q", v)
	}
	if v, _ := read("e", false, load("fresh", nil)); v != "fresh" {
		t.Fatalf("after a read that raced a forget: %q, want a new read", v)
	}
}
