package backend

import (
	"fmt"
	"os"
	"path/filepath"
)

// CheckJobsDirReachable checks that users other than the server's may
// pass through every directory above dir (an absolute path, or relative
// to the working directory), as jobs run as users of their own must, to
// reach their working directories.
func CheckJobsDirReachable(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("jobs directory %s: %w", dir, err)
	}
	for d := filepath.Dir(abs); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("checking %s above the jobs directory: %w", d, err)
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("jobs run as users of their own, who could not reach the jobs directory %s: %s has mode %04o; choose a --jobs-dir that others may pass through (such as /var/lib/capblock-jobs), or let them pass with chmod o+x %s",
				abs, d, fi.Mode().Perm(), d)
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}
