// Package privatefile writes and guards the files that the server alone
// may read, such as its administrator's token and its secrets key: made
// readable by their owner only, written whole and durably, never over a
// file already there, and taken back from others when an older file was
// left readable.
package privatefile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// WriteNew writes data to a new file at path, readable only by its owner,
// all at once and durably. It writes a temporary file in path's folder,
// syncs it, links it to path, which fails with fs.ErrExist rather than
// replace a file (or follow a link) already there, then syncs the folder:
// without that last step a power cut could lose the new name while what
// depends on the file (secrets sealed under a new key) is already stored.
// When the folder cannot be synced the new file is removed and the error
// returned, so that a caller that fails leaves nothing behind.
func WriteNew(path string, data []byte) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
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
	if err := syncFile(tmp); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := link(tmp.Name(), path); err != nil {
		return err
	}
	if err := syncDir(dir); err != nil {
		_ = os.Remove(path)
		return fmt.Errorf("syncing the folder %s after writing %s: %w", dir, filepath.Base(path), err)
	}
	return nil
}

// The steps of WriteNew that a crash may fall between. Tests replace them
// to see their order, and to crash between them.
var (
	// syncFile makes a file's data durable.
	syncFile = (*os.File).Sync
	// link gives the synced file its name.
	link = os.Link
	// syncDir makes the entries of the folder dir durable.
	syncDir = syncFolder
)

// syncFolder makes the entries of the folder dir durable.
func syncFolder(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Tighten takes away from group and others what they may do with the file
// at path (an older server, or a copy, may have left it 0644), leaving the
// owner's bits, and reports whether it changed the mode. A missing file,
// or one that is not a regular file, is left alone. A loose file that the
// server cannot make its own alone is an error that says what to do: one
// whose mode it cannot change, or one owned by another user, who would
// still read it.
func Tighten(path string) (bool, error) {
	info, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("checking who may read %s: %w", path, err)
	}
	perm := info.Mode().Perm()
	if !info.Mode().IsRegular() || perm&0o077 == 0 {
		return false, nil
	}
	if st, ok := info.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return false, fmt.Errorf("%s may be read or written by others (mode %04o) and belongs to user %d, not to the server's user %d: make it the server's own (chown, then chmod 600 %s) or move it away",
			path, perm, st.Uid, os.Geteuid(), path)
	}
	if err := os.Chmod(path, perm&^0o077); err != nil {
		return false, fmt.Errorf("%s may be read or written by others (mode %04o) and cannot be made private: %w; chmod 600 %s as its owner, or move it away",
			path, perm, err, path)
	}
	return true, nil
}
