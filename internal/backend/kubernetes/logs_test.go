package kubernetes

import (
	"bytes"
	"strings"
	"testing"
	"testing/iotest"
)

// TestReadTail: a read from the end keeps only the end of a log longer
// than its buffer, read in pieces.
func TestReadTail(t *testing.T) {
	log := strings.Repeat("0123456789", 10_000) // 100,000 bytes, several reads
	tests := map[string]struct {
		n    int64
		want string
	}{
		"the last bytes":           {n: 7, want: "3456789"},
		"more than a read's chunk": {n: 40_000, want: log[60_000:]},
		"more than the log":        {n: 1 << 20, want: log},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			total, got, err := readTail(iotest.HalfReader(strings.NewReader(log)), tc.n)
			if err != nil {
				t.Fatal(err)
			}
			if total != int64(len(log)) || !bytes.Equal(got, []byte(tc.want)) {
				t.Errorf("readTail(%d) = %d, %d bytes; want %d, %d bytes", tc.n, total, len(got), len(log), len(tc.want))
			}
		})
	}
}
