package store

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"capblock/internal/core"
)

// TestCanonicalPlacementsRoundTrip: what EncodePlacements writes, the
// canonical reader reads back as it was.
func TestCanonicalPlacementsRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	cases := [][]core.Placement{nil, {}, {{Node: "n1"}}, {{Node: "n1", GPUs: []int{}}}, {{Node: "é-ü.node_1", GPUs: []int{0, 10, 63}}}}
	for range 200 {
		ps := make([]core.Placement, rng.IntN(5))
		for i := range ps {
			ps[i].Node = fmt.Sprintf("node-%d", rng.IntN(100000))
			for range rng.IntN(9) {
				ps[i].GPUs = append(ps[i].GPUs, rng.IntN(1000))
			}
		}
		cases = append(cases, ps)
	}
	for _, want := range cases {
		text := EncodePlacements(want)
		got, ok := decodeCanonicalPlacements(text)
		if !ok {
			t.Fatalf("%s: not read as canonical", text)
		}
		viaJSON, err := decodePlacementsJSON(text)
		if err != nil || !reflect.DeepEqual(got, viaJSON) {
			t.Fatalf("%s: canonical %#v, encoding/json %#v (%v)", text, got, viaJSON, err)
		}
	}
}

// TestCanonicalPlacementsRefuse: text that is not exactly the canonical
// form is left to encoding/json.
func TestCanonicalPlacementsRefuse(t *testing.T) {
	for _, text := range []string{
		``, `[`, `[] `, ` []`, `[{"node":"a","gpus":[1]},]`, `[{"gpus":[1],"node":"a"}]`, `[{"node":"a","gpus":[01]}]`,
		`[{"node":"a","gpus":[-1]}]`, `[{"node":"a\"b","gpus":[1]}]`, `[{"node":"a\u0041","gpus":[1]}]`, `[{"node":"a","gpus":[1 ]}]`,
		`[{"node":"a","gpus":[12345678901]}]`, "[{\"node\":\"\xff\",\"gpus\":[1]}]", `[{"node":"a","gpus":[1],"x":1}]`, `{}`,
	} {
		if ps, ok := decodeCanonicalPlacements(text); ok {
			t.Errorf("%q read as canonical: %#v", text, ps)
		}
	}
}

// FuzzDecodePlacements: on any text the canonical reader accepts,
// encoding/json reads the same placements.
func FuzzDecodePlacements(f *testing.F) {
	for _, s := range []string{`null`, `[]`, `[{"node":"a","gpus":[0,1]}]`, `[{"node":"a","gpus":null},{"node":"b","gpus":[]}]`, `[{"node":"a","gpus":[01]}]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		got, ok := decodeCanonicalPlacements(text)
		if !ok {
			return
		}
		want, err := decodePlacementsJSON(text)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: canonical %#v, encoding/json %#v (%v)", text, got, want, err)
		}
	})
}
