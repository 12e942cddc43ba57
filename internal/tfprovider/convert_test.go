package tfprovider

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

func TestKeepTime(t *testing.T) {
	at := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	tests := map[string]struct {
		old  types.String
		want string
	}{
		"null takes the server's":           {types.StringNull(), "2026-12-03T12:00:00Z"},
		"the same instant keeps its offset": {types.StringValue("2026-12-03T13:00:00+01:00"), "2026-12-03T13:00:00+01:00"},
		"another instant is replaced":       {types.StringValue("2026-12-03T00:00:00Z"), "2026-12-03T12:00:00Z"},
		"an unreadable one is replaced":     {types.StringValue("tomorrow"), "2026-12-03T12:00:00Z"},
	}
	for name, tc := range tests {
		if diff := cmp.Diff(tc.want, keepTime(tc.old, at).ValueString()); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
}

func TestKeepAmount(t *testing.T) {
	tests := map[string]struct {
		old, server, want string
	}{
		"same decimal, other spelling": {"5000", "5000.00", "5000"},
		"another amount":               {"5000", "4000.00", "4000.00"},
		"not a number":                 {"lots", "4000.00", "4000.00"},
	}
	for name, tc := range tests {
		if diff := cmp.Diff(tc.want, keepAmount(types.StringValue(tc.old), tc.server).ValueString()); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
}

// TestClientToken checks that a retry of one purchase sends one key, that
// two purchases (another quote, another name or team) send two, and that
// the key fits the API's 64 characters.
func TestClientToken(t *testing.T) {
	first := clientToken("block", "cbo-1", "train", "")
	if again := clientToken("block", "cbo-1", "train", ""); again != first {
		t.Errorf("the same purchase derived %q then %q", first, again)
	}
	for _, other := range []string{
		clientToken("block", "cbo-2", "train", ""),
		clientToken("block", "cbo-1", "eval", ""),
		clientToken("block", "cbo-1", "train", "team-b"),
		clientToken("plan", "cbo-1", "train", ""),
		clientToken("block", "cbo-1train", "", ""),
	} {
		if other == first {
			t.Errorf("another purchase derived the same key %q", first)
		}
	}
	if len(first) > 64 {
		t.Errorf("key %q is %d characters, above the API's 64", first, len(first))
	}
}
