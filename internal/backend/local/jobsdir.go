package local

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"capblock/internal/backend"
)

// Jobs directory layout of the local engine. The jobs directory is the
// server's, and others may only pass through it (0711); each job gets a
// working directory of its own, owned by its team's user and readable by
// it alone (0700), with its checkpoint directory inside. What the job
// must not touch lives in directories only the server enters (0700): the
// executor's state and the logs, which the server reads back for the API
// and so must never be a file that a job could swap for a link. What a
// job may read and not write, when it will be killed, lives in notices:
// a directory of the server's per job that only the job's group may
// read (0750), which others pass through (0711).
const (
	jobsStateDir   = "state"
	jobsLogsDir    = "logs"
	jobsNoticesDir = "notices"
)

// killAtPath is the file in which a job's instances read when they will
// be killed, under the jobs directory dir.
func killAtPath(dir, jobID string) string {
	return filepath.Join(dir, jobsNoticesDir, jobID, "kill-at")
}

// writeKillAt writes at (RFC 3339) into a job's kill-at file under the
// jobs directory dir, making the job's notices directory, which only the
// job's user's group reads (user nil: the server's user alone).
func writeKillAt(dir, jobID string, at time.Time, user *backend.User) error {
	notices := filepath.Join(dir, jobsNoticesDir)
	mode := os.FileMode(0o700)
	if user != nil {
		mode = 0o711 // job users pass through to their own
	}
	if err := os.Mkdir(notices, mode); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("creating the jobs' notices directory: %w", err)
	}
	if err := os.Chmod(notices, mode); err != nil {
		return fmt.Errorf("opening the jobs' notices directory to job users: %w", err)
	}
	jobDir := filepath.Dir(killAtPath(dir, jobID))
	if err := os.Mkdir(jobDir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("creating the job's notices directory: %w", err)
	}
	if user != nil {
		if err := os.Lchown(jobDir, -1, int(user.GID)); err != nil {
			return fmt.Errorf("giving the job's notices directory to its group: %w", err)
		}
		if err := os.Chmod(jobDir, 0o750); err != nil {
			return fmt.Errorf("letting the job read its notices directory: %w", err)
		}
	}
	return rewriteKillAt(dir, jobID, at)
}

// rewriteKillAt replaces the time in a job's kill-at file, in its notices
// directory made by writeKillAt (nothing is done without one): a new
// file of the directory's group, renamed over the old, so that the job
// never reads half a time. The directory is the server's, so nothing in
// it is a link a job put there.
func rewriteKillAt(dir, jobID string, at time.Time) error {
	path := killAtPath(dir, jobID)
	fi, err := os.Lstat(filepath.Dir(path))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("checking the job's notices directory: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || st.Uid != uint32(os.Geteuid()) {
		return fmt.Errorf("the job's notices directory %s is not a directory of the server's", filepath.Dir(path))
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".kill-at-*")
	if err != nil {
		return fmt.Errorf("writing when the job is killed: %w", err)
	}
	defer os.Remove(f.Name()) // gone once renamed
	_, err = f.WriteString(at.UTC().Format(time.RFC3339))
	if err == nil && fi.Mode().Perm()&0o050 != 0 {
		if err = f.Chown(-1, int(st.Gid)); err == nil {
			err = f.Chmod(0o640)
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("writing when the job is killed: %w", err)
	}
	return nil
}

// prepareJobsDir makes the jobs directory, which a job's user must be
// able to pass through when jobs run as other users.
func prepareJobsDir(dir string, isolated bool) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating the jobs directory %s: %w", dir, err)
	}
	if !isolated {
		return nil
	}
	if err := os.Chmod(dir, 0o711); err != nil {
		return fmt.Errorf("letting job users pass through the jobs directory %s: %w", dir, err)
	}
	return backend.CheckJobsDirReachable(dir)
}

// prepareWorkDir makes a job's working directory and its checkpoint
// directory on the job's first start, owned by the job's user. Once made,
// the directory is the job's: nothing in it is touched again, so that a
// link a job put there never leads the server anywhere.
func prepareWorkDir(dir string, user *backend.User) error {
	err := os.Mkdir(dir, 0o700)
	if errors.Is(err, fs.ErrExist) {
		return checkWorkDir(dir, user)
	}
	if err != nil {
		return fmt.Errorf("creating the job's directory: %w", err)
	}
	checkpoint := filepath.Join(dir, "checkpoint")
	if err := os.Mkdir(checkpoint, 0o700); err != nil {
		return fmt.Errorf("creating the job's checkpoint directory: %w", err)
	}
	if user == nil {
		return nil
	}
	for _, d := range []string{checkpoint, dir} {
		if err := os.Lchown(d, int(user.UID), int(user.GID)); err != nil {
			return fmt.Errorf("giving %s to the job's user: %w", d, err)
		}
	}
	return nil
}

// checkWorkDir checks that an existing working directory is a directory
// of the job's user (or, unisolated, the server's).
func checkWorkDir(dir string, user *backend.User) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("checking the job's directory: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok {
		return fmt.Errorf("the job's directory %s is not a directory", dir)
	}
	want := uint32(os.Geteuid())
	if user != nil {
		want = user.UID
	}
	if st.Uid != want {
		return fmt.Errorf("the job's directory %s belongs to uid %d, not to the job's user %d", dir, st.Uid, want)
	}
	return nil
}
