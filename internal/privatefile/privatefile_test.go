package privatefile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestWriteNew: the file holds all of data, is readable by its owner
// only, and no temporary file is left beside it; a second write is
// fs.ErrExist and leaves the first file as it was.
func TestWriteNew(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "secrets.key")
	data := []byte(strings.Repeat("0123456789abcdef", 4) + "\n")
	if err := WriteNew(path, data); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil || string(got) != string(data) {
		t.Fatalf("the file holds %q, %v; want %q", got, err, data)
	}
	if info, err := os.Stat(path); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("the file: %v, %v; want mode 0600", info, err)
	}
	if err := WriteNew(path, []byte("other\n")); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("a second WriteNew = %v; want fs.ErrExist", err)
	}
	if got, _ := os.ReadFile(path); string(got) != string(data) {
		t.Fatalf("the second WriteNew changed the file to %q", got)
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 1 {
		t.Fatalf("the folder holds %v, %v; want the file alone", entries, err)
	}
}

// TestWriteNewSyncsTheFolder: the folder is synced once the new name is
// linked and before WriteNew returns; when it cannot be, WriteNew fails
// and takes the file away.
func TestWriteNewSyncsTheFolder(t *testing.T) {
	dir := t.TempDir()
	var synced []string
	fail := false
	orig := syncDir
	t.Cleanup(func() { syncDir = orig })
	syncDir = func(d string) error {
		if _, err := os.Stat(filepath.Join(d, "admin.token")); err != nil {
			t.Errorf("the folder was synced before the file was linked: %v", err)
		}
		synced = append(synced, d)
		if fail {
			return errors.New("disk gone")
		}
		return orig(d)
	}
	if err := WriteNew(filepath.Join(dir, "admin.token"), []byte("token\n")); err != nil {
		t.Fatal(err)
	}
	if len(synced) != 1 || synced[0] != dir {
		t.Fatalf("synced %v; want the folder %s once", synced, dir)
	}

	dir = t.TempDir()
	fail = true
	err := WriteNew(filepath.Join(dir, "admin.token"), []byte("token\n"))
	if err == nil || !strings.Contains(err.Error(), "disk gone") {
		t.Fatalf("WriteNew with a failing folder sync = %v; want that error", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "admin.token")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the file is still there after a failed sync: %v", err)
	}
}

// TestWriteNewSteps: the file is whole when its data is synced, synced
// before it gets its name, and named before its folder is synced: a
// crash between any two steps leaves no name, or a name on the whole,
// synced file; WriteNew returns only after the last.
func TestWriteNewSteps(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "secrets.key")
	data := []byte(strings.Repeat("0123456789abcdef", 4) + "\n")
	var steps []string
	origSyncFile, origLink, origSyncDir := syncFile, link, syncDir
	t.Cleanup(func() { syncFile, link, syncDir = origSyncFile, origLink, origSyncDir })
	syncFile = func(f *os.File) error {
		got, err := os.ReadFile(f.Name())
		steps = append(steps, fmt.Sprintf("sync file (whole: %t, %v)", string(got) == string(data), err))
		return origSyncFile(f)
	}
	link = func(oldname, newname string) error {
		_, err := os.Stat(newname)
		steps = append(steps, fmt.Sprintf("link %s (there before: %t)", filepath.Base(newname), err == nil))
		return origLink(oldname, newname)
	}
	syncDir = func(d string) error {
		got, err := os.ReadFile(path)
		steps = append(steps, fmt.Sprintf("sync folder (file whole: %t, %v)", string(got) == string(data), err))
		return origSyncDir(d)
	}
	if err := WriteNew(path, data); err != nil {
		t.Fatal(err)
	}
	want := []string{"sync file (whole: true, <nil>)", "link secrets.key (there before: false)", "sync folder (file whole: true, <nil>)"}
	if diff := cmp.Diff(want, steps); diff != "" {
		t.Errorf("WriteNew's steps (-want +got):\n%s", diff)
	}
}

func TestTighten(t *testing.T) {
	tests := map[string]struct {
		mode        os.FileMode
		owner       int // -1: the test's own user
		want        os.FileMode
		wantChanged bool
		wantErr     string
	}{
		"readable by all":     {mode: 0o644, owner: -1, want: 0o600, wantChanged: true},
		"writable by group":   {mode: 0o620, owner: -1, want: 0o600, wantChanged: true},
		"private":             {mode: 0o600, owner: -1, want: 0o600},
		"owner read only":     {mode: 0o400, owner: -1, want: 0o400},
		"another user's file": {mode: 0o644, owner: 4242, want: 0o644, wantErr: "belongs to user 4242"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "admin.token")
			if err := os.WriteFile(path, []byte("token\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, tc.mode); err != nil {
				t.Fatal(err)
			}
			if tc.owner >= 0 {
				if os.Geteuid() != 0 {
					t.Skip("giving a file to another user needs root")
				}
				if err := os.Chown(path, tc.owner, tc.owner); err != nil {
					t.Fatal(err)
				}
			}
			changed, err := Tighten(path)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Tighten = %v, %v; want an error saying %q", changed, err, tc.wantErr)
				}
			} else if err != nil || changed != tc.wantChanged {
				t.Fatalf("Tighten = %v, %v; want %v", changed, err, tc.wantChanged)
			}
			if info, err := os.Stat(path); err != nil || info.Mode().Perm() != tc.want {
				t.Fatalf("after Tighten: %v, %v; want mode %04o", info, err, tc.want)
			}
		})
	}
	if changed, err := Tighten(filepath.Join(t.TempDir(), "missing")); changed || err != nil {
		t.Fatalf("Tighten of a missing file = %v, %v; want nothing done", changed, err)
	}
}
