package executor

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
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

// stream returns n bytes of a stream that names each position: line i is
// i in eight digits and a newline, so a byte read at the wrong position
// shows.
func stream(from, n int64) []byte {
	out := make([]byte, 0, n+18)
	for line := from / 9; int64(len(out)) < n+from%9; line++ {
		out = fmt.Appendf(out, "%08d\n", line)
	}
	return out[from%9 : from%9+n]
}

// writeLog writes the stream's bytes [from, from+n) to w in pieces of the
// given sizes, in turn.
func writeLog(t *testing.T, w *logWriter, from, n int64, pieces ...int64) {
	t.Helper()
	for i := 0; n > 0; i++ {
		k := min(pieces[i%len(pieces)], n)
		if _, err := w.Write(stream(from, k)); err != nil {
			t.Fatal(err)
		}
		from, n = from+k, n-k
	}
}

func openTestLog(t *testing.T, path string, capBytes int64) *logWriter {
	t.Helper()
	w, err := openLogWriter(path, capBytes)
	if err != nil {
		t.Fatalf("openLogWriter: %v", err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

func TestLogKeepsTheNewestBytes(t *testing.T) {
	const ring = MinLogBytes - logHeaderSize
	tests := map[string]struct {
		written   int64
		pieces    []int64
		wantStart int64
	}{
		"under the cap":            {written: 1000, pieces: []int64{100}, wantStart: 0},
		"exactly the cap":          {written: ring, pieces: []int64{ring}, wantStart: 0},
		"wrapped in small pieces":  {written: 3*ring + 17, pieces: []int64{1, 7, 100, 333}, wantStart: 2*ring + 17},
		"one piece beyond the cap": {written: 5*ring + 3, pieces: []int64{5*ring + 3}, wantStart: 4*ring + 3},
		"big and small pieces":     {written: 10 * ring, pieces: []int64{ring + 1, 2}, wantStart: 9 * ring},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "job.log")
			w := openTestLog(t, path, MinLogBytes)
			writeLog(t, w, 0, tc.written, tc.pieces...)

			got, next, err := ReadLog(path, 0, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(stream(tc.wantStart, tc.written-tc.wantStart)), string(got)); diff != "" {
				t.Errorf("log from offset 0 (-want +got):\n%s", diff)
			}
			if next != tc.written {
				t.Errorf("next offset = %d, want %d", next, tc.written)
			}
			if fi, err := os.Stat(path); err != nil || fi.Size() > MinLogBytes {
				t.Errorf("log file: %v, %v; want at most %d bytes", fi.Size(), err, MinLogBytes)
			}
		})
	}
}

func TestReadLogOffsetsAreStreamPositions(t *testing.T) {
	const ring = MinLogBytes - logHeaderSize
	path := filepath.Join(t.TempDir(), "job.log")
	w := openTestLog(t, path, MinLogBytes)
	const written = 3*ring + 100
	writeLog(t, w, 0, written, 1000)
	const oldest = written - ring
	tests := map[string]struct {
		offset   int64
		limit    int
		wantFrom int64
		wantLen  int64
	}{
		"dropped output resumes at the oldest kept byte": {offset: 10, limit: 50, wantFrom: oldest, wantLen: 50},
		"the oldest kept byte":                           {offset: oldest, limit: 50, wantFrom: oldest, wantLen: 50},
		"across the ring's end":                          {offset: 3*ring - 10, limit: 30, wantFrom: 3*ring - 10, wantLen: 30},
		"short at the end":                               {offset: written - 5, limit: 50, wantFrom: written - 5, wantLen: 5},
		"nothing new":                                    {offset: written, limit: 50, wantFrom: written},
		"past the end":                                   {offset: written + 20, limit: 50, wantFrom: written + 20},
		"tail":                                           {offset: -7, limit: 50, wantFrom: written - 7, wantLen: 7},
		"tail longer than what is kept":                  {offset: -ring - 500, limit: 1 << 20, wantFrom: oldest, wantLen: ring},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, next, err := ReadLog(path, tc.offset, tc.limit)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(stream(tc.wantFrom, tc.wantLen)), string(got)); diff != "" {
				t.Errorf("data (-want +got):\n%s", diff)
			}
			if want := tc.wantFrom + tc.wantLen; next != want {
				t.Errorf("next offset = %d, want %d", next, want)
			}
		})
	}
}

// A reader that follows a log while it is written past its cap gets, at
// every offset it is given, the bytes of that position, and reaches the
// end.
func TestReadLogFollowsALogBeyondItsCap(t *testing.T) {
	path := filepath.Join(t.TempDir(), "job.log")
	w := openTestLog(t, path, MinLogBytes)
	const written = 1 << 20
	done := make(chan struct{})
	go func() {
		defer close(done)
		for from := int64(0); from < written; from += 997 {
			if _, err := w.Write(stream(from, min(997, written-from))); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	var offset, read, gaps int64
	for finished := false; ; {
		select {
		case <-done:
			finished = true
		default:
		}
		b, next, err := ReadLog(path, offset, 1500)
		if err != nil {
			t.Fatal(err)
		}
		from := next - int64(len(b))
		if from < offset {
			t.Fatalf("ReadLog(%d) returned bytes from %d", offset, from)
		}
		if from > offset {
			gaps++
		}
		if want := stream(from, int64(len(b))); string(b) != string(want) {
			i := 0
			for b[i] == want[i] {
				i++
			}
			t.Fatalf("ReadLog(%d) returned %d bytes from %d, wrong from %d on: %q, want %q",
				offset, len(b), from, from+int64(i), b[i:min(i+20, len(b))], want[i:min(i+20, len(want))])
		}
		read += int64(len(b))
		offset = next
		if finished && len(b) == 0 {
			break
		}
	}
	if offset != written {
		t.Errorf("the follower ended at %d, want %d", offset, written)
	}
	t.Logf("read %d of %d bytes, skipping dropped output %d times", read, written, gaps)
}

func TestLogKeepsItsPositionsAcrossRunsAndCaps(t *testing.T) {
	path := filepath.Join(t.TempDir(), "job.log")
	runs := []struct {
		capBytes int64
		written  int64
		// wantKept is how many of the newest bytes the log holds after the
		// run.
		wantKept int64
	}{
		{capBytes: 0, written: 10000, wantKept: 10000},
		{capBytes: 2 * MinLogBytes, written: 100, wantKept: 2*MinLogBytes - logHeaderSize},
		{capBytes: 2 * MinLogBytes, written: 5000, wantKept: 2*MinLogBytes - logHeaderSize},
		{capBytes: MinLogBytes, written: 10, wantKept: MinLogBytes - logHeaderSize},
		{capBytes: 0, written: 20000, wantKept: MinLogBytes - logHeaderSize + 20000},
		{capBytes: 3 * MinLogBytes, written: 1, wantKept: 3*MinLogBytes - logHeaderSize},
	}
	var end int64
	for i, r := range runs {
		w, err := openLogWriter(path, r.capBytes)
		if err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		writeLog(t, w, end, r.written, 333)
		w.Close()
		end += r.written
		got, start := readAll(t, path)
		if start != end-r.wantKept || got != string(stream(start, r.wantKept)) {
			t.Fatalf("run %d: log holds %d bytes from %d, want the %d before %d", i, len(got), start, r.wantKept, end)
		}
		if fi, _ := os.Stat(path); r.capBytes > 0 && fi.Size() > r.capBytes {
			t.Errorf("run %d: the log has %d bytes, over its cap of %d", i, fi.Size(), r.capBytes)
		}
	}
}

// A plain log of an earlier version is read as it is, and continued from
// its end.
func TestLogContinuesAPlainLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "job.log")
	if err := os.WriteFile(path, []byte("old output\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, next, err := ReadLog(path, 0, 100); err != nil || string(got) != "old output\n" || next != 11 {
		t.Fatalf("ReadLog of a plain log = %q, %d, %v", got, next, err)
	}
	w := openTestLog(t, path, 0)
	if _, err := w.Write([]byte("new\n")); err != nil {
		t.Fatal(err)
	}
	got, next, err := ReadLog(path, 0, 100)
	if err != nil || string(got) != "new\n" || next != 15 {
		t.Errorf("ReadLog = %q, %d, %v; want the new output at 11 to 15", got, next, err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("log mode = %v, %v; want 0600", fi.Mode(), err)
	}
}

// A job can replace its log, which lies in its own directory, but the
// server must not read or write another file through it.
func TestLogRefusesWhatIsNotALogFile(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("server secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := map[string]func(path string) error{
		"symbolic link": func(path string) error { return os.Symlink(secret, path) },
		"hard link":     func(path string) error { return os.Link(secret, path) },
		"fifo":          func(path string) error { return syscall.Mkfifo(path, 0o600) },
		"directory":     func(path string) error { return os.Mkdir(path, 0o700) },
	}
	for name, plant := range tests {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "job.log")
			if err := plant(path); err != nil {
				t.Fatal(err)
			}
			if got, _, err := ReadLog(path, 0, 100); err == nil {
				t.Errorf("ReadLog read %q, want an error", got)
			}
			if name == "directory" {
				return // the shim then fails to start; see TestStartRejects
			}
			w := openTestLog(t, path, 0)
			if _, err := w.Write([]byte("job output")); err != nil {
				t.Fatal(err)
			}
			if got, _, err := ReadLog(path, 0, 100); err != nil || string(got) != "job output" {
				t.Errorf("ReadLog after the shim replaced it = %q, %v", got, err)
			}
			if b, _ := os.ReadFile(secret); string(b) != "server secret" {
				t.Errorf("the secret file now holds %q", b)
			}
		})
	}
}

// readAll reads a whole log through ReadLog, in small pieces, and returns it
// with the offset it starts at.
func readAll(t *testing.T, path string) (string, int64) {
	t.Helper()
	var b strings.Builder
	var first, offset int64 = -1, 0
	for {
		data, next, err := ReadLog(path, offset, 1<<20)
		if err != nil {
			t.Fatalf("ReadLog(%s, %d): %v", path, offset, err)
		}
		if len(data) == 0 {
			if first < 0 {
				first = next
			}
			return b.String(), first
		}
		if first < 0 {
			first = next - int64(len(data))
		}
		b.Write(data)
		offset = next
	}
}
