package core

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestBlockDoc: a whole block survives the encoding that replicas pass
// each other, and the encoding names its fields itself (not after Go's).
func TestBlockDoc(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	b := Block{ID: "cb-1", Name: "llama", Team: "team-a", InstanceType: "h100.8x", GPUModel: "H100", Count: 2, Zone: "zone-a",
		Start: at, End: at.Add(48 * time.Hour), State: StateActive, Fee: Money{Minor: 123456, Currency: "USD"},
		CreatedAt: at.Add(-time.Hour), Tags: map[string]string{"env": "prod"},
		Placements: []Placement{{Node: "a-h100-1", GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}}, {Node: "a-h100-2", GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}}},
		Warned:     true, Terminating: true, PlanID: "tp-1", Version: 7}
	data, err := EncodeBlockDoc(b)
	if err != nil {
		t.Fatal(err)
	}
	for _, goName := range []string{`"InstanceType"`, `"Placements"`, `"Minor"`} {
		if strings.Contains(string(data), goName) {
			t.Errorf("the encoding names a field after Go: %s in %s", goName, data)
		}
	}
	got, err := DecodeBlockDoc(data)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(b, got); diff != "" {
		t.Fatalf("round trip (-want +got):\n%s", diff)
	}
}
