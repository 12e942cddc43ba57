package core

import (
	"errors"
	"testing"
)

// TestPlaceExtensionOfABlockChangedMeanwhile: an extension decided on a
// block read before a cancel (the index no longer holds it) or before
// another change (the index holds a later version) is a conflict, not a
// panic, and leaves the index as it was. Before, the first dereferenced
// the missing block, and the request's panic left the service's lock
// held.
func TestPlaceExtensionOfABlockChangedMeanwhile(t *testing.T) {
	// Movable whole-node blocks, and one in the way of a's extension, so
	// that the extension re-packs.
	a := makeBlock("a").whole("n1").hours(100, 110).obj()
	a.Version = 1
	b := makeBlock("b").whole("n1").hours(110, 120).obj()
	b.Version = 1
	ix := newTestIndex(t, a, b)

	plan, err := ix.PlaceExtension(a, at(115), indexNow)
	if err != nil {
		t.Fatalf("extending a as indexed: %v", err)
	}
	if len(plan.Moves) == 0 && plan.Placements[0].Node == "n1" {
		t.Fatalf("the extension over b neither moved b nor a: %+v", plan)
	}
	if got, _ := ix.Block("a"); got.End != at(110) || got.Version != 1 {
		t.Fatalf("after PlaceExtension the index holds a as %+v, want it as it was", got)
	}

	stale := a
	stale.Version = 0
	if _, err := ix.PlaceExtension(stale, at(115), indexNow); !errors.Is(err, ErrConflict) {
		t.Fatalf("extending an older version of a: %v, want ErrConflict", err)
	}
	ix.Remove("a") // cancelled meanwhile
	if _, err := ix.PlaceExtension(a, at(115), indexNow); !errors.Is(err, ErrConflict) {
		t.Fatalf("extending a block the index no longer holds: %v, want ErrConflict", err)
	}
}
