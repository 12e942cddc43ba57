package seal

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"capblock/internal/core"
)

func TestSealOpen(t *testing.T) {
	k, other := Generate(), Generate()
	secret := []byte("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
	s := k.Seal(secret, []byte("AKIAEXAMPLE"))
	if bytes.Contains(s.Ciphertext, secret) || s.KeyID != k.ID() {
		t.Fatalf("sealed %+v: want the secret hidden and key id %s", s, k.ID())
	}
	got, err := k.Open(s, []byte("AKIAEXAMPLE"))
	if err != nil || !bytes.Equal(got, secret) {
		t.Fatalf("Open = %q, %v; want the secret", got, err)
	}
	if again := k.Seal(secret, []byte("AKIAEXAMPLE")); bytes.Equal(again.Nonce, s.Nonce) {
		t.Fatal("two seals used one nonce")
	}
	tests := map[string]struct {
		key  *Key
		edit func(s *core.SealedSecret)
		ad   string
		want error
	}{
		"another key":           {key: other, ad: "AKIAEXAMPLE", want: ErrWrongKey},
		"another key, its id":   {key: other, ad: "AKIAEXAMPLE", edit: func(c *core.SealedSecret) { c.KeyID = other.ID() }, want: ErrTampered},
		"other associated data": {key: k, ad: "AKIAOTHER", want: ErrTampered},
		"changed ciphertext":    {key: k, ad: "AKIAEXAMPLE", edit: func(c *core.SealedSecret) { c.Ciphertext[0] ^= 1 }, want: ErrTampered},
		"short nonce":           {key: k, ad: "AKIAEXAMPLE", edit: func(c *core.SealedSecret) { c.Nonce = c.Nonce[:4] }, want: ErrTampered},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := core.SealedSecret{KeyID: s.KeyID, Nonce: bytes.Clone(s.Nonce), Ciphertext: bytes.Clone(s.Ciphertext)}
			if tc.edit != nil {
				tc.edit(&c)
			}
			got, err := tc.key.Open(c, []byte(tc.ad))
			if !errors.Is(err, tc.want) || got != nil {
				t.Fatalf("Open = %q, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestLoadOrCreate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "secrets.key")
	k, made, err := LoadOrCreate(path, nil)
	if err != nil || !made {
		t.Fatalf("LoadOrCreate of a missing file = %v, %v; want a new key", made, err)
	}
	info, err := os.Stat(path)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("the key file: %v, %v; want mode 0600", info, err)
	}
	again, made, err := LoadOrCreate(path, nil)
	if err != nil || made || again.ID() != k.ID() {
		t.Fatalf("LoadOrCreate of the file = %v, %v, %v; want key %s read back", again, made, err, k.ID())
	}
	s := k.Seal([]byte("secret"), nil)
	if _, err := again.Open(s, nil); err != nil {
		t.Fatalf("the key read back does not open what the first sealed: %v", err)
	}
}

// TestLoadOrCreateKeepsSealedSecrets: a missing key file is not made
// anew while the database holds secrets sealed under a key: the error
// names the file and the key to restore, and no file is left. A file
// there is read whatever sealed the secrets (the service says whether it
// opens them).
func TestLoadOrCreateKeepsSealedSecrets(t *testing.T) {
	path := filepath.Join(t.TempDir(), "secrets.key")
	_, made, err := LoadOrCreate(path, []string{"sk-0123456789abcdef"})
	if !errors.Is(err, ErrKeyFileMissing) || made || !strings.Contains(err.Error(), "sk-0123456789abcdef") || !strings.Contains(err.Error(), path) {
		t.Fatalf("LoadOrCreate of a missing file with sealed secrets = %v, %v; want ErrKeyFileMissing naming the file and the key", made, err)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a key file was made: %v", err)
	}
	k, _, err := LoadOrCreate(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	again, made, err := LoadOrCreate(path, []string{"sk-0123456789abcdef"})
	if err != nil || made || again.ID() != k.ID() {
		t.Fatalf("LoadOrCreate of a file there = %v, %v; want key %s read", made, err, k.ID())
	}
}

func TestLoadOrCreateConcurrent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "secrets.key")
	const servers = 8
	ids := make([]string, servers)
	errs := make([]error, servers)
	var wg sync.WaitGroup
	for i := range servers {
		wg.Go(func() {
			k, _, err := LoadOrCreate(path, nil)
			if err == nil {
				ids[i] = k.ID()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i := range servers {
		if errs[i] != nil || ids[i] != ids[0] {
			t.Fatalf("server %d: key %s, %v; want every server on key %s", i, ids[i], errs[i], ids[0])
		}
	}
}

func TestLoadRefuses(t *testing.T) {
	tests := map[string]struct {
		text string
		mode os.FileMode
		want string
	}{
		"readable by others": {text: strings.Repeat("ab", 32) + "\n", mode: 0o644, want: "may be read by others"},
		"short":              {text: strings.Repeat("ab", 16) + "\n", mode: 0o600, want: "does not hold a key"},
		"not hex":            {text: strings.Repeat("zz", 32) + "\n", mode: 0o600, want: "does not hold a key"},
		"empty":              {text: "", mode: 0o600, want: "does not hold a key"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "secrets.key")
			if err := os.WriteFile(path, []byte(tc.text), tc.mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, tc.mode); err != nil {
				t.Fatal(err)
			}
			_, _, err := LoadOrCreate(path, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("LoadOrCreate = %v; want an error saying %q", err, tc.want)
			}
			if got, _ := os.ReadFile(path); string(got) != tc.text {
				t.Fatalf("the refused file was changed to %q", got)
			}
		})
	}
}
