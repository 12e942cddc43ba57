package testproc

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestTail(t *testing.T) {
	tests := map[string]struct {
		in   string
		n    int
		want string
	}{
		"fewer lines than asked": {in: "a\nb\n", n: 3, want: "a\nb"},
		"last lines":             {in: "a\nb\nc\nd\n", n: 2, want: "c\nd"},
		"no trailing newline":    {in: "a\nb\nc", n: 1, want: "c"},
		"empty":                  {in: "", n: 2, want: ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, string(Tail([]byte(tc.in), tc.n))); diff != "" {
				t.Errorf("tail (-want +got):\n%s", diff)
			}
		})
	}
}
