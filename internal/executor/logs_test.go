package executor

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestReadLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "job.log")
	if err := os.WriteFile(path, []byte("0123456789"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		offset   int64
		limit    int
		want     string
		wantNext int64
	}{
		"from the start":            {offset: 0, limit: 4, want: "0123", wantNext: 4},
		"from the middle":           {offset: 4, limit: 4, want: "4567", wantNext: 8},
		"short at the end":          {offset: 8, limit: 4, want: "89", wantNext: 10},
		"nothing new":               {offset: 10, limit: 4, want: "", wantNext: 10},
		"past the end":              {offset: 20, limit: 4, want: "", wantNext: 20},
		"tail":                      {offset: -3, limit: 100, want: "789", wantNext: 10},
		"tail longer than the file": {offset: -100, limit: 100, want: "0123456789", wantNext: 10},
		"default limit":             {offset: 2, limit: 0, want: "23456789", wantNext: 10},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, next, err := ReadLog(path, tc.offset, tc.limit)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, string(got)); diff != "" {
				t.Errorf("data (-want +got):\n%s", diff)
			}
			if next != tc.wantNext {
				t.Errorf("next offset = %d, want %d", next, tc.wantNext)
			}
		})
	}
}

func TestReadLogFollowsAGrowingLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "job.log")
	if _, _, err := ReadLog(path, 0, 10); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("ReadLog of a missing log = %v, want fs.ErrNotExist", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var got []byte
	var offset int64
	for _, chunk := range []string{"step 1\n", "step 2\n", "done\n"} {
		if _, err := f.WriteString(chunk); err != nil {
			t.Fatal(err)
		}
		b, next, err := ReadLog(path, offset, 3)
		for err == nil && len(b) > 0 {
			got, offset = append(got, b...), next
			b, next, err = ReadLog(path, offset, 3)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff("step 1\nstep 2\ndone\n", string(got)); diff != "" {
		t.Errorf("followed log (-want +got):\n%s", diff)
	}
}
