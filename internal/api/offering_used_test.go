package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"testing"

	"capblock/internal/core"
)

// TestOfferingUsedProblem: a quote bought twice is 409 offering_used on
// every purchase route, never a plain conflict (which a client would
// retry), and the code is in the OpenAPI document's enum.
func TestOfferingUsedProblem(t *testing.T) {
	if errors.Is(core.ErrOfferingUsed, core.ErrConflict) {
		t.Fatal("ErrOfferingUsed wraps ErrConflict: the service would retry it")
	}
	for _, route := range []struct{ method, target, body string }{
		{http.MethodPost, "/v1/blocks", `{"offeringId": "cbo-abc.sig", "clientToken": "t"}`},
		{http.MethodPost, "/v1/blocks/cb-1/extensions", `{"offeringId": "cbe-ext.sig"}`},
	} {
		fake := newFake()
		fake.err = fmt.Errorf("quote cbo-abc: %w", core.ErrOfferingUsed)
		a := newTestAPI(t, fake, Options{})
		r := a.do(t, route.method, route.target, route.body)
		checkProblem(t, r, wantProblem{http.StatusConflict, CodeOfferingUsed, "quote cbo-abc: offering already used"})
		if p := r.problem(t); p.Title != "Offering already used" {
			t.Errorf("%s %s: title %q", route.method, route.target, p.Title)
		}
	}

	a := newTestAPI(t, newFake(), Options{})
	r := a.do(t, http.MethodGet, "/openapi.json", "")
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]struct {
					Enum []string `json:"enum"`
				} `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(r.body, &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	if codes := doc.Components.Schemas["Problem"].Properties["code"].Enum; !slices.Contains(codes, CodeOfferingUsed) {
		t.Errorf("the Problem schema's codes %v lack %s", codes, CodeOfferingUsed)
	}
}
