package seal

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"capblock/internal/privatefile"
)

// ErrKeyFileMissing is returned by LoadOrCreate for a missing key file
// while the database holds secrets sealed under a key.
var ErrKeyFileMissing = errors.New("the secrets key file is missing")

// LoadOrCreate reads the key in the file at path, or, when there is no
// file, makes a new key and writes it there, readable only by its owner.
// It reports whether it made the key. Replicas that share a database must
// share the key file: each sealed secret opens only under the key that
// sealed it. Two servers starting at once beside one missing file agree
// on one key: the file is linked into place, never written over.
//
// sealedUnder are the ids of the keys that sealed the secrets the
// database already holds. When there are any, a missing file is not made
// anew, for a new key would open none of them: it is ErrKeyFileMissing,
// naming the keys to restore. The new key is returned only once its file
// is durable (privatefile.WriteNew syncs the file, then its folder), so
// that nothing is sealed under a key that a crash could still lose.
//
// A key file readable by anyone but its owner is refused, as ssh refuses
// such a private key.
func LoadOrCreate(path string, sealedUnder []string) (*Key, bool, error) {
	k, err := Load(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return k, false, err
	}
	if len(sealedUnder) > 0 {
		return nil, false, fmt.Errorf("%w: %s does not exist, and the database holds secrets sealed under secrets key %s: restore that key's file (from a backup, or from another replica, which share one) or point the server at it; a new key would open none of them",
			ErrKeyFileMissing, path, strings.Join(sealedUnder, ", "))
	}
	k, text := generate()
	if err := privatefile.WriteNew(path, []byte(text)); errors.Is(err, fs.ErrExist) {
		k, err := Load(path) // another server wrote it first
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

// Load reads the key file at path: 64 hex digits (32 bytes), then an
// optional newline. A missing file is an error wrapping fs.ErrNotExist.
func Load(path string) (*Key, error) {
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
