package executor

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// defaultLogRead is what ReadLog reads when asked for no particular amount.
const defaultLogRead = 64 << 10

// ReadLog reads up to limit bytes (64 KiB when limit <= 0) of the log at
// path, starting at offset, and returns them with the offset to read from
// next. A negative offset counts from the end: -4096 reads the last 4 KiB.
// To follow a log, call it again with the returned offset; an empty result
// means nothing new has been written yet. A log that does not exist yet is
// an error that wraps fs.ErrNotExist.
func ReadLog(path string, offset int64, limit int) ([]byte, int64, error) {
	if limit <= 0 {
		limit = defaultLogRead
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, offset, fmt.Errorf("reading log: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, offset, fmt.Errorf("reading log: %w", err)
	}
	size := fi.Size()
	if offset < 0 {
		offset = max(size+offset, 0)
	}
	if offset >= size {
		return nil, offset, nil
	}
	buf := make([]byte, min(int64(limit), size-offset))
	n, err := f.ReadAt(buf, offset)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, offset, fmt.Errorf("reading log %s at %d: %w", path, offset, err)
	}
	return buf[:n], offset + int64(n), nil
}
