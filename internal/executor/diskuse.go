package executor

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/dustin/go-humanize"
)

// Limits.DiskBytes bounds a job's working directory: the shim measures
// what the directory holds on disk before it starts the command, and then
// every diskCheckEvery (less often for a directory that takes long to
// walk), and ends the command past the limit. The directory persists
// across runs (it holds the checkpoints), is shared by the job's
// instances, and lives on the file system of the jobs directory, often
// the database's; the other ways to bound it do not fit that:
//
//   - a size-limited tmpfs is lost with the run;
//   - a file-system image mounted through a loop device per job would
//     be mounted by every instance of the job at once, which corrupts it,
//     unless a mount outlived the runs and so needed an owner of its own;
//   - user or project quotas need a file system made and mounted with
//     them (usrquota, prjquota), which a server cannot turn on by itself
//     on the one it is given, and a user's quota would count a team's
//     jobs together.
//
// Measuring needs nothing of the machine and applies anywhere; its price
// is that it is not a hard bound: a job can write what it writes in one
// interval past the limit before it is ended. Once past, the job cannot
// start again until the directory holds less.

// diskCheckEvery is how often the shim measures the working directory of
// an instance with a disk limit, at least: a walk that takes long is
// repeated no more often than diskCheckShare allows.
const diskCheckEvery = time.Second

// diskCheckShare bounds the share of the shim's time that walks: a walk
// that took d waits at least diskCheckShare·d before the next.
const diskCheckShare = 10

// dirUsage returns the bytes that the files under dir take on disk
// (allocated blocks, so a sparse file counts what it holds, not its
// length), each file once however many links it has. It follows no
// symbolic link and stays on dir's file system, so that a job cannot
// make it count what is not in its directory. Files that go while it
// walks are skipped.
func dirUsage(dir string) (int64, error) {
	root, err := os.Lstat(dir)
	if err != nil {
		return 0, err
	}
	rootSt, ok := root.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, errors.New("reading the file system of " + dir)
	}
	type inode struct{ dev, ino uint64 }
	seen := map[inode]bool{}
	var total int64
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		fi, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return nil
		}
		if st.Dev != rootSt.Dev {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if st.Nlink > 1 && !d.IsDir() {
			k := inode{uint64(st.Dev), st.Ino}
			if seen[k] {
				return nil
			}
			seen[k] = true
		}
		total += st.Blocks * 512
		return nil
	})
	return total, err
}

// checkDisk returns an error wrapping ErrDiskLimit when dir holds more
// than limit bytes on disk.
func checkDisk(dir string, limit int64) error {
	used, err := dirUsage(dir)
	if err != nil {
		return fmt.Errorf("measuring what the working directory %s holds: %w", dir, err)
	}
	if used > limit {
		return fmt.Errorf("%w: %s holds %s on disk, and its limit is %s; the job cannot run again until it holds less",
			ErrDiskLimit, dir, humanize.IBytes(uint64(used)), humanize.IBytes(uint64(limit)))
	}
	return nil
}

// diskLimitPrefix starts the shim's status line when it did not start
// the command for its disk limit, so that Start's error wraps
// ErrDiskLimit (diskLimitError).
const diskLimitPrefix = "disk-limit: "

// diskLimitError is the shim's refusal for the disk limit, as the
// executor reads it from the shim: its message, which names the limit
// already, wrapping ErrDiskLimit.
type diskLimitError struct{ msg string }

func (e diskLimitError) Error() string { return e.msg }
func (e diskLimitError) Unwrap() error { return ErrDiskLimit }
