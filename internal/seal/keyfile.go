package seal

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// LoadOrCreate reads the key in the file at path, or, when there is no
// file, makes a new key and writes it there, readable only by its owner.
// It reports whether it made the key. Replicas that share a database must
// share the key file: each sealed secret opens only under the key that
// sealed it. Two servers starting at once beside one missing file agree
// on one key: the file is linked into place, never written over.
//
// A key file readable by anyone but its owner is refused, as ssh refuses
// such a private key.
func LoadOrCreate(path string) (*Key, bool, error) {
	k, err := load(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return k, false, err
	}
	k, text := generate()
	if err := writeNewFile(path, []byte(text)); errors.Is(err, fs.ErrExist) {
		k, err := load(path) // another server wrote it first
		return k, false, err
	} else if err != nil {
		return nil, false, fmt.Errorf("writing a new secrets key to %s: %w", path, err)
	}
	return k, true, nil
}

// generate returns a new key and the text of its file.
func generate() (*Key, string) {
	k := Generate()
	return k, hex.EncodeToString(k.raw) + "\n"
}

// load reads the key file at path: 64 hex digits (32 bytes), then an
// optional newline.
func load(path string) (*Key, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading the secrets key file %s: %w", path, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("reading the secrets key file %s: %w", path, err)
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("the secrets key file %s is not a regular file", path)
	}
	if perm := info.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("the secrets key file %s may be read by others (mode %04o): make it readable only by the server's user (chmod 600 %s)", path, perm, path)
	}
	text, err := io.ReadAll(io.LimitReader(f, 4*keyLen))
	if err != nil {
		return nil, fmt.Errorf("reading the secrets key file %s: %w", path, err)
	}
	raw, err := hex.DecodeString(strings.TrimRight(string(text), "\r\n"))
	if err != nil || len(raw) != keyLen {
		return nil, fmt.Errorf("the secrets key file %s does not hold a key: want %d hex digits on one line", path, 2*keyLen)
	}
	return New(raw)
}

// writeNewFile writes data to a new file at path, readable only by its
// owner, all at once: it is written under a temporary name and linked to
// path, which fails with fs.ErrExist rather than replace a file (or follow
// a link) already there.
func writeNewFile(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Link(tmp.Name(), path)
}
