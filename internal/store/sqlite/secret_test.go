package sqlite

import (
	"bytes"
	"crypto/rand"
	"os"
	"path/filepath"
	"testing"

	"capblock/internal/core"
	"capblock/internal/store"
)

// fileBytes is what the database at path holds on disk: the file, its
// write-ahead log and its shared memory.
func fileBytes(t *testing.T, path string) []byte {
	t.Helper()
	var all []byte
	for _, suffix := range []string{"", "-wal", "-shm"} {
		b, err := os.ReadFile(path + suffix)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	return all
}

// TestSealSecretWipesTheClearSecret: a signing secret stored in clear is
// in the database's files; once sealed, its bytes are in none of them,
// neither in the file's free space nor in the write-ahead log.
func TestSealSecretWipesTheClearSecret(t *testing.T) {
	path := filepath.Join(t.TempDir(), "capblock.db")
	s := openTemp(t, path)
	clear := make([]byte, 32)
	_, _ = rand.Read(clear)
	if _, err := s.InitSecret(t.Context(), store.SigningSecret{Clear: clear}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(fileBytes(t, path), clear) {
		t.Fatal("the clear secret is not found in the database's files: the search for it proves nothing")
	}
	sealed := core.SealedSecret{KeyID: "sk-0123456789abcdef", Nonce: bytes.Repeat([]byte{1}, 12), Ciphertext: bytes.Repeat([]byte{2}, 48)}
	if err := s.SealSecret(t.Context(), clear, sealed); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(fileBytes(t, path), clear) {
		t.Error("the clear secret is still in the database's files after it was sealed")
	}
}
