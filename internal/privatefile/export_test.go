package privatefile

import (
	"os"
	"testing"
)

// Steps are the steps of WriteNew that a crash may fall between, for the
// tests of this folder's external test package.
type Steps struct {
	SyncFile func(f *os.File) error
	Link     func(oldname, newname string) error
	SyncDir  func(dir string) error
}

// WrapSteps replaces WriteNew's steps with what wrap makes of them, until
// t ends.
func WrapSteps(t testing.TB, wrap func(orig Steps) Steps) {
	orig := Steps{SyncFile: syncFile, Link: link, SyncDir: syncDir}
	t.Cleanup(func() { syncFile, link, syncDir = orig.SyncFile, orig.Link, orig.SyncDir })
	s := wrap(orig)
	syncFile, link, syncDir = s.SyncFile, s.Link, s.SyncDir
}
