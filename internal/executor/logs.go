package executor

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc64"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// An instance's log holds the newest bytes of everything its runs have
// printed, at most a cap of them, and names them by their position in that
// whole stream, so that a reader following the log keeps its place when
// older output is dropped. The file is a header followed by the kept bytes:
// with a cap, in a ring where stream position p is kept at data offset
// p mod size; without one, in a row from the oldest kept byte.
//
// The shim is the only writer. It moves start past what it is about to
// overwrite before overwriting it, and moves end once the new bytes are
// written; so a reader that reads the header, then the bytes, then the
// header again knows that what it read is intact from the second header's
// start on. A checksum tells a header that was read while being written.
//
// Files without the header are logs of earlier versions of capblock, read
// as plain text from position 0.

const (
	logMagic      = "CAPLOG1\n"
	logHeaderSize = 64
	// MinLogBytes is the smallest cap on a log: its header and 4 KiB of
	// output.
	MinLogBytes = logHeaderSize + 4096
)

var logCRC = crc64.MakeTable(crc64.ECMA)

// logHeader is the state of a log: it keeps the stream's bytes from start
// to end, in a ring of size bytes (0: no cap).
type logHeader struct {
	size, start, end int64
}

func (h logHeader) encode() []byte {
	b := make([]byte, logHeaderSize)
	copy(b, logMagic)
	binary.LittleEndian.PutUint64(b[8:], uint64(h.size))
	binary.LittleEndian.PutUint64(b[16:], uint64(h.start))
	binary.LittleEndian.PutUint64(b[24:], uint64(h.end))
	binary.LittleEndian.PutUint64(b[32:], crc64.Checksum(b[:32], logCRC))
	return b
}

// errTornHeader is a header whose checksum does not match: it was read
// while being written, or it is damaged.
var errTornHeader = errors.New("log header checksum mismatch")

// decodeLogHeader decodes a header; ok is false for a file that has none.
func decodeLogHeader(b []byte) (h logHeader, ok bool, err error) {
	if len(b) < logHeaderSize || string(b[:8]) != logMagic {
		return logHeader{}, false, nil
	}
	if binary.LittleEndian.Uint64(b[32:]) != crc64.Checksum(b[:32], logCRC) {
		return logHeader{}, true, errTornHeader
	}
	h = logHeader{
		size:  int64(binary.LittleEndian.Uint64(b[8:])),
		start: int64(binary.LittleEndian.Uint64(b[16:])),
		end:   int64(binary.LittleEndian.Uint64(b[24:])),
	}
	if h.size < 0 || h.start < 0 || h.end < h.start || (h.size > 0 && h.end-h.start > h.size) {
		return logHeader{}, true, fmt.Errorf("log header holds %+v", h)
	}
	return h, true, nil
}

// span returns the file offset of stream position pos and how many bytes
// from there are contiguous in the file, at most n.
func (h logHeader) span(pos, n int64) (int64, int64) {
	if h.size == 0 {
		return logHeaderSize + pos - h.start, n
	}
	slot := pos % h.size
	return logHeaderSize + slot, min(n, h.size-slot)
}

// logWriter appends output to a log, keeping the newest bytes within its
// cap.
type logWriter struct {
	f *os.File
	h logHeader
}

// openLogWriter opens the log at path for a run to append to, creating it.
// A log whose cap was different is rewritten with what the new cap keeps.
// Anything at path other than a regular file of this process's user with
// one link, such as a symbolic link that a job put there, is replaced.
func openLogWriter(path string, capBytes int64) (*logWriter, error) {
	f, err := openLogFile(path, os.O_RDWR)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("replacing log %s: %w", path, err)
			}
		}
		f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
		if err != nil {
			return nil, fmt.Errorf("creating log: %w", err)
		}
	}
	w := &logWriter{f: f}
	if err := w.resume(capBytes); err != nil {
		f.Close()
		return nil, fmt.Errorf("opening log %s: %w", path, err)
	}
	return w, nil
}

// resume takes up the log where the previous run left it.
func (w *logWriter) resume(capBytes int64) error {
	if err := w.f.Chmod(0o600); err != nil {
		return err
	}
	size := int64(0)
	if capBytes > 0 {
		size = capBytes - logHeaderSize
	}
	b := make([]byte, logHeaderSize)
	n, err := w.f.ReadAt(b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	old, ok, err := decodeLogHeader(b[:n])
	switch {
	case err != nil:
		return err
	case ok && old.size == size:
		w.h = old
		return nil
	}
	// 1. Keep what the new cap allows of the old log: nothing of a plain
	// one, whose positions go on after its last byte.
	var kept []byte
	if ok {
		n := old.end - old.start
		if size > 0 {
			n = min(n, size)
		}
		kept, err = readKept(w.f, old, old.end-n, n)
		if err != nil {
			return err
		}
	} else if fi, err := w.f.Stat(); err == nil {
		old = logHeader{start: fi.Size(), end: fi.Size()}
	} else {
		return err
	}
	// 2. Drop everything before rewriting, so that a reader never takes
	// the new layout's bytes for the old one's.
	from := old.end - int64(len(kept))
	w.h = logHeader{size: size, start: from, end: from}
	if err := w.writeHeader(logHeader{size: size, start: old.end, end: old.end}); err != nil {
		return err
	}
	if err := w.f.Truncate(logHeaderSize); err != nil {
		return err
	}
	if err := w.writeHeader(w.h); err != nil {
		return err
	}
	_, err = w.Write(kept)
	return err
}

func readKept(f *os.File, h logHeader, from, n int64) ([]byte, error) {
	out := make([]byte, n)
	for done := int64(0); done < n; {
		at, m := h.span(from+done, n-done)
		k, err := f.ReadAt(out[done:done+m], at)
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		if int64(k) < m {
			return out[:done+int64(k)], nil // a crash left the file short
		}
		done += m
	}
	return out, nil
}

func (w *logWriter) writeHeader(h logHeader) error {
	_, err := w.f.WriteAt(h.encode(), 0)
	return err
}

// Write appends b, dropping the oldest bytes beyond the cap: first from
// the header, then from the file.
func (w *logWriter) Write(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	h := w.h
	end := h.end + int64(len(b))
	data, pos := b, h.end
	if h.size > 0 && end-h.start > h.size {
		start := end - h.size
		if start > pos {
			data, pos = b[start-pos:], start
		}
		if err := w.writeHeader(logHeader{size: h.size, start: start, end: pos}); err != nil {
			return 0, err
		}
		h.start = start
	}
	for len(data) > 0 {
		at, n := h.span(pos, int64(len(data)))
		if _, err := w.f.WriteAt(data[:n], at); err != nil {
			return 0, err
		}
		data, pos = data[n:], pos+n
	}
	h.end = end
	if err := w.writeHeader(h); err != nil {
		return 0, err
	}
	w.h = h
	return len(b), nil
}

func (w *logWriter) Close() error { return w.f.Close() }

// openLogFile opens a log without following a symbolic link and without
// blocking on a FIFO, and checks that it is a regular file of this
// process's user with a single link: a job may replace its log (it lies in
// the job's directory), but must not make the server read or write another
// file through it.
func openLogFile(path string, flag int) (*os.File, error) {
	f, err := os.OpenFile(path, flag|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	st, _ := fi.Sys().(*syscall.Stat_t)
	if !fi.Mode().IsRegular() || st == nil || st.Nlink != 1 || int(st.Uid) != os.Geteuid() {
		f.Close()
		return nil, fmt.Errorf("%s is not a log file of this server", path)
	}
	return f, nil
}

// defaultLogRead is what ReadLog reads when asked for no particular amount.
const defaultLogRead = 64 << 10

// ReadLog reads up to limit bytes (64 KiB when limit <= 0) of the log at
// path, starting at offset, and returns them with the offset to read from
// next. Offsets are positions in everything the instance has printed,
// whatever the log's cap has dropped since: an offset before the oldest
// byte kept reads from that byte, and a negative offset counts from the
// end, so -4096 reads the last 4 KiB. To follow a log, call it again with
// the returned offset; an empty result means nothing new has been written
// yet. A log that does not exist yet is an error that wraps fs.ErrNotExist.
func ReadLog(path string, offset int64, limit int) ([]byte, int64, error) {
	if limit <= 0 {
		limit = defaultLogRead
	}
	f, err := openLogFile(path, os.O_RDONLY)
	if err != nil {
		return nil, offset, fmt.Errorf("reading log: %w", err)
	}
	defer f.Close()
	for range 100 {
		b, next, err := readLogOnce(f, offset, int64(limit))
		if !errors.Is(err, errLogMoved) {
			if err != nil {
				return nil, offset, fmt.Errorf("reading log %s at %d: %w", path, offset, err)
			}
			return b, next, nil
		}
	}
	return nil, offset, fmt.Errorf("reading log %s at %d: it is rewritten faster than it can be read", path, offset)
}

// errLogMoved says that the writer overtook a read, which is then repeated.
var errLogMoved = errors.New("log moved while being read")

func readLogOnce(f *os.File, offset, limit int64) ([]byte, int64, error) {
	h, ok, err := readLogHeader(f)
	if err != nil {
		return nil, offset, err
	}
	if !ok {
		return readPlain(f, offset, limit)
	}
	if offset < 0 {
		offset = h.end + offset
	}
	offset = max(offset, h.start)
	if offset >= h.end {
		return nil, offset, nil
	}
	b, err := readKept(f, h, offset, min(limit, h.end-offset))
	if err != nil {
		return nil, offset, err
	}
	after, _, err := readLogHeader(f)
	switch {
	case err != nil:
		return nil, offset, err
	case after.size != h.size || (h.size == 0 && after.start != h.start):
		return nil, offset, errLogMoved // rewritten for another cap
	case after.start >= offset+int64(len(b)) && len(b) > 0:
		return nil, offset, errLogMoved // all overwritten meanwhile
	case after.start > offset:
		b, offset = b[after.start-offset:], after.start
	}
	return b, offset + int64(len(b)), nil
}

// readLogHeader reads a log's header; ok is false for a plain file. A torn
// header is read again.
func readLogHeader(f *os.File) (h logHeader, ok bool, err error) {
	b := make([]byte, logHeaderSize)
	for range 100 {
		n, rerr := f.ReadAt(b, 0)
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			return logHeader{}, false, rerr
		}
		h, ok, err = decodeLogHeader(b[:n])
		if !errors.Is(err, errTornHeader) {
			return h, ok, err
		}
	}
	return h, ok, err
}

// readPlain reads a log without a header.
func readPlain(f *os.File, offset, limit int64) ([]byte, int64, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, offset, err
	}
	size := fi.Size()
	if offset < 0 {
		offset = max(size+offset, 0)
	}
	if offset >= size {
		return nil, offset, nil
	}
	buf := make([]byte, min(limit, size-offset))
	n, err := f.ReadAt(buf, offset)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, offset, err
	}
	return buf[:n], offset + int64(n), nil
}
