package slurm

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestExpandHostlist(t *testing.T) {
	tests := map[string]struct {
		in      string
		want    []string
		wantErr bool
	}{
		"none":              {in: "(null)"},
		"one":               {in: "sim0", want: []string{"sim0"}},
		"a list":            {in: "sim0,gpu-a07", want: []string{"sim0", "gpu-a07"}},
		"ranges":            {in: "sim[0-2,5]", want: []string{"sim0", "sim1", "sim2", "sim5"}},
		"padded":            {in: "a[08-10]", want: []string{"a08", "a09", "a10"}},
		"brackets and more": {in: "r[1-2]n[1-2],x", want: []string{"r1n1", "r1n2", "r2n1", "r2n2", "x"}},
		"a suffix":          {in: "n[1-2]-ib", want: []string{"n1-ib", "n2-ib"}},
		"unclosed":          {in: "sim[0-2", wantErr: true},
		"backwards":         {in: "sim[2-0]", wantErr: true},
		"not a number":      {in: "sim[a-b]", wantErr: true},
		"empty item":        {in: "sim0,,sim1", wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := expandHostlist(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want an error: %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
