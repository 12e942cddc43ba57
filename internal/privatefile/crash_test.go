package privatefile_test

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"capblock/internal/fleet"
	"capblock/internal/privatefile"
	"capblock/internal/seal"
	"capblock/internal/service"
	"capblock/internal/store"
	"capblock/internal/store/sqlite"
)

// startServer does with the secrets key what serve does at start
// (cmd/capblock's loadSecretsKey, then service.New): the key file is made
// only for a database that holds no sealed secret, and the service seals
// the offering signing secret under the key.
func startServer(ctx context.Context, st store.Full, path string) (*service.Service, error) {
	sealed, err := store.SealedKeyIDs(ctx, st)
	if err != nil {
		return nil, err
	}
	key, _, err := seal.LoadOrCreate(path, slices.Sorted(maps.Keys(sealed)))
	if err != nil {
		return nil, err
	}
	return service.New(ctx, service.Config{Fleet: fleet.Demo(), Store: st, SecretsKey: key})
}

// crash is what a step replaced by the test panics with, to stop the
// start where a crash would.
type crash struct{}

// TestNewSecretsKeyAndACrash: the first start of a server crashes while
// it writes its new secrets key, after the file is linked and before its
// folder is synced. Nothing was sealed under the key by then: the key is
// handed out only once its name is durable. On restart the server finds
// the key where the name survived the crash; where it was lost, it makes
// a new one, which is right, since nothing depends on the lost one. (A
// database that does hold secrets sealed under a key whose file is lost
// is refused: cmd/capblock's TestServeKeepsItsSecretsKey.)
func TestNewSecretsKeyAndACrash(t *testing.T) {
	for name, nameSurvives := range map[string]bool{"the name survived": true, "the name was lost": false} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "secrets.key")
			st, err := sqlite.Open(t.Context(), filepath.Join(dir, "capblock.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })

			// 1. The first start crashes before the folder is synced; what
			// was there at that moment is recorded.
			var (
				real          privatefile.Steps
				linked        []byte
				sealedAtCrash map[string]int
			)
			privatefile.WrapSteps(t, func(orig privatefile.Steps) privatefile.Steps {
				real = orig
				orig.SyncDir = func(string) error {
					linked, _ = os.ReadFile(path)
					sealedAtCrash, err = store.SealedKeyIDs(t.Context(), st)
					if err != nil {
						t.Error(err)
					}
					panic(crash{})
				}
				return orig
			})
			if !crashes(t, func() {
				_, err := startServer(t.Context(), st, path)
				t.Errorf("the start returned %v through the crash", err)
			}) {
				t.Fatal("the start did not reach the folder's sync")
			}
			if len(strings.TrimSpace(string(linked))) != 64 {
				t.Fatalf("the key file at the crash holds %q; want the whole key, synced before it was linked", linked)
			}
			if len(sealedAtCrash) != 0 {
				t.Fatalf("secrets were sealed before the key file's folder was synced: %v", sealedAtCrash)
			}
			if _, ok, err := st.Secret(t.Context()); err != nil || ok {
				t.Fatalf("the database holds a signing secret after the crash: %t, %v; want none", ok, err)
			}

			// 2. The power cut: an entry of a folder not synced may be lost.
			if !nameSurvives {
				if err := os.Remove(path); err != nil {
					t.Fatal(err)
				}
			}

			// 3. The restart: the key is found, or made anew; the service
			// seals under it.
			privatefile.WrapSteps(t, func(privatefile.Steps) privatefile.Steps { return real })
			if _, err := startServer(t.Context(), st, path); err != nil {
				t.Fatalf("the restart: %v", err)
			}
			key, err := seal.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			text, _ := os.ReadFile(path)
			if found := string(text) == string(linked); found != nameSurvives {
				t.Errorf("the restart found the key written before the crash: %t; want %t", found, nameSurvives)
			}
			if stored, _, err := st.Secret(t.Context()); err != nil || stored.Sealed.KeyID != key.ID() {
				t.Fatalf("the signing secret is sealed under %q, %v; want the key file's %s", stored.Sealed.KeyID, err, key.ID())
			}
		})
	}
}

// crashes runs f and reports whether it stopped at a crash.
func crashes(t *testing.T, f func()) (crashed bool) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(crash); !ok {
				panic(r)
			}
			crashed = true
		}
	}()
	f()
	return false
}
