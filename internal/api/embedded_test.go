package api

import (
	"encoding/json"
	"net/http"
	"testing"
)

// TestEmbeddedFieldsInSchemas checks that the document's schemas of
// types that embed an unexported struct hold its fields, as the JSON
// does: BlockDetail is a Block with more.
func TestEmbeddedFieldsInSchemas(t *testing.T) {
	r := newTestAPI(t, newFake(), Options{}).do(t, http.MethodGet, "/openapi.json", "")
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]json.RawMessage
				Required   []string
			}
		}
	}
	if err := json.Unmarshal(r.body, &doc); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string][]string{
		"BlockDetail":  {"id", "instanceCount", "upfrontFee", "handovers", "utilisation"},
		"NewAccessKey": {"accessKeyId", "secretAccessKey"},
	} {
		s, ok := doc.Components.Schemas[name]
		if !ok {
			t.Errorf("no schema %s", name)
			continue
		}
		for _, field := range want {
			if _, ok := s.Properties[field]; !ok {
				t.Errorf("schema %s lacks %s", name, field)
			}
		}
	}
	for _, name := range []string{"Cash", "NodeHealth"} {
		if _, ok := doc.Components.Schemas[name]; ok {
			t.Errorf("schema %s is in the document, which nothing uses", name)
		}
	}
}
