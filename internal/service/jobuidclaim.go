package service

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The servers of one machine that run jobs as users of their own must not
// share those users unless they share the database that allocates them:
// else a team of one server and a team of the other would run as the same
// uid, and read each other's files. Each server claims its range of job
// users in a registry, a directory of this machine (DefaultUIDRegistry,
// on /run, which a reboot empties), for as long as it runs:
//
//	<registry>/lock                          taken (flock) while a claim is made
//	<registry>/<first>-<last>.<random>.claim one per server, flock'ed by it
//
// A claim is a file that its server holds an exclusive flock on; the
// kernel lets go of the lock when the server exits, however it ends, so
// a claim whose file can be locked is stale: its server is gone, and the
// next claim removes it. A claim is refused when its range overlaps a
// live claim of another database; replicas of one database on one
// machine share their users and may overlap.

// DefaultUIDRegistry is where the servers of this machine claim their
// ranges of job users.
const DefaultUIDRegistry = "/run/capblock/job-uids"

// ErrUIDRangeClaimed is returned when a range of job users overlaps one
// that a server of another database on this machine holds.
var ErrUIDRangeClaimed = errors.New("the range of job users overlaps one that another capblock server on this machine holds")

// uidClaim is this server's claim on its range of job users: its file,
// open and locked.
type uidClaim struct {
	f *os.File
}

// uidClaimRecord is what a claim's file says of its holder.
type uidClaimRecord struct {
	First int       `json:"first"`
	Last  int       `json:"last"`
	Owner string    `json:"owner"`
	PID   int       `json:"pid"`
	Since time.Time `json:"since"`
}

// databaseOwner names the database whose offering secret is secret, in a
// claim, without telling the secret: servers of one database share it.
func databaseOwner(secret []byte) string {
	h := sha256.Sum256(append([]byte("capblock job users\x00"), secret...))
	return hex.EncodeToString(h[:8])
}

// claimUIDRange claims r in the registry dir for the database owner, and
// holds the claim until release (or this process's end). It fails with
// ErrUIDRangeClaimed when a live claim of another owner overlaps r.
func claimUIDRange(dir string, r UIDRange, owner string) (*uidClaim, error) {
	// 1. One claim at a time on this machine.
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("claiming job users %d-%d: creating the registry %s: %w", r.First, r.Last, dir, err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("claiming job users %d-%d: opening the registry's lock: %w", r.First, r.Last, err)
	}
	defer lock.Close()
	if err := flock(lock, syscall.LOCK_EX); err != nil {
		return nil, fmt.Errorf("claiming job users %d-%d: locking the registry %s: %w", r.First, r.Last, dir, err)
	}

	// 2. Check the others' claims, removing the stale ones.
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("claiming job users %d-%d: listing the registry %s: %w", r.First, r.Last, dir, err)
	}
	for _, d := range entries {
		first, last, ok := parseClaimName(d.Name())
		if !ok || last < r.First || first > r.Last {
			continue
		}
		holder, live, err := readClaim(filepath.Join(dir, d.Name()))
		if err != nil {
			return nil, fmt.Errorf("claiming job users %d-%d: %w", r.First, r.Last, err)
		}
		if live && holder.Owner != owner {
			return nil, fmt.Errorf("%w: %d-%d overlaps %d-%d, held by the server with pid %d (since %s), which serves another database; two such servers would run their teams' jobs as the same users, able to read each other's files. Give this server a range of its own with --job-uid-range, or stop the other (its claim: %s)",
				ErrUIDRangeClaimed, r.First, r.Last, holder.First, holder.Last, holder.PID, holder.Since.UTC().Format(time.RFC3339), filepath.Join(dir, d.Name()))
		}
	}

	// 3. Claim, and hold the claim's lock for as long as this server runs.
	path := filepath.Join(dir, fmt.Sprintf("%d-%d.%s.claim", r.First, r.Last, strings.ToLower(rand.Text()[:10])))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("claiming job users %d-%d: %w", r.First, r.Last, err)
	}
	rec, _ := json.Marshal(uidClaimRecord{First: r.First, Last: r.Last, Owner: owner, PID: os.Getpid(), Since: time.Now().UTC()})
	if err := flock(f, syscall.LOCK_EX|syscall.LOCK_NB); err == nil {
		_, err = f.Write(append(rec, '\n'))
	}
	if err != nil {
		f.Close()
		os.Remove(path)
		return nil, fmt.Errorf("claiming job users %d-%d: writing %s: %w", r.First, r.Last, path, err)
	}
	return &uidClaim{f: f}, nil
}

// readClaim reads a claim's file and reports whether its holder still
// holds it; a stale claim is removed.
func readClaim(path string) (uidClaimRecord, bool, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return uidClaimRecord{}, false, nil
	}
	if err != nil {
		return uidClaimRecord{}, false, fmt.Errorf("reading the claim %s: %w", path, err)
	}
	defer f.Close()
	switch err := flock(f, syscall.LOCK_EX|syscall.LOCK_NB); {
	case err == nil:
		// Its holder is gone: the lock went with it.
		if err := os.Remove(path); err != nil {
			return uidClaimRecord{}, false, fmt.Errorf("removing the stale claim %s: %w", path, err)
		}
		return uidClaimRecord{}, false, nil
	case !errors.Is(err, syscall.EWOULDBLOCK):
		return uidClaimRecord{}, false, fmt.Errorf("checking the claim %s: %w", path, err)
	}
	var rec uidClaimRecord
	b, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(b, &rec)
	}
	if err != nil {
		return uidClaimRecord{}, false, fmt.Errorf("reading the claim %s, held by a running server: %w", path, err)
	}
	return rec, true, nil
}

// parseClaimName reads the range of a claim's file name,
// <first>-<last>.<random>.claim.
func parseClaimName(name string) (first, last int, ok bool) {
	rest, ok := strings.CutSuffix(name, ".claim")
	if !ok {
		return 0, 0, false
	}
	rng, _, _ := strings.Cut(rest, ".")
	a, b, ok := strings.Cut(rng, "-")
	first, err1 := strconv.Atoi(a)
	last, err2 := strconv.Atoi(b)
	return first, last, ok && err1 == nil && err2 == nil
}

// release gives the claim up.
func (c *uidClaim) release() error {
	if c == nil {
		return nil
	}
	err := os.Remove(c.f.Name())
	if cerr := c.f.Close(); err == nil {
		err = cerr
	}
	return err
}

func flock(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// Close gives up what the service holds on this machine for as long as it
// runs: its claim on its range of job users. A server's end does so too;
// jobs' instances keep running either way.
func (s *Service) Close() error {
	if s.jobs == nil {
		return nil
	}
	s.jobs.mu.Lock()
	c := s.jobs.uidClaim
	s.jobs.uidClaim = nil
	s.jobs.mu.Unlock()
	if err := c.release(); err != nil {
		return fmt.Errorf("giving up the claim on job users: %w", err)
	}
	return nil
}
