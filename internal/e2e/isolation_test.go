package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// requireRoot skips a test that needs root (to run jobs as other users,
// in cgroups), but fails it under CI, which runs as root.
func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("this test needs root, to run jobs as users of their own in cgroups; CI runs as root")
	}
	t.Skip("needs root: jobs run as users of their own only on a server run as root")
}

// tenant is a team with a member, acting through the member's token.
type tenant struct {
	team, token string
}

// newTenant makes a team and a member of it, with a token.
func newTenant(t *testing.T, url, name string) tenant {
	t.Helper()
	var team struct {
		ID string `json:"id"`
	}
	if code := call(t, url, "POST", "/v1/teams", map[string]string{"name": name}, &team); code != 201 {
		t.Fatalf("creating team %s: %d", name, code)
	}
	var u user
	if code := call(t, url, "POST", "/v1/users", map[string]string{"name": name + "-dev", "team": team.ID, "role": "member"}, &u); code != 201 {
		t.Fatalf("creating a member of %s: %d", name, code)
	}
	var tok struct {
		Token string `json:"token"`
	}
	if code := call(t, url, "POST", "/v1/users/"+u.ID+"/tokens", map[string]string{}, &tok); code != 201 {
		t.Fatalf("creating a token for %s: %d", name, code)
	}
	return tenant{team: team.ID, token: tok.Token}
}

// buyL4 buys one l4.1x (one GPU) for hours from start, as the tenant.
func (tn tenant) buyL4(t *testing.T, url string, start time.Time, hours int) block {
	t.Helper()
	var offs struct {
		Offerings []offering `json:"offerings"`
	}
	q := searchQuery("l4.1x", 1, hours, start, start.Add(time.Duration(hours)*time.Hour))
	if code := call(t, url, "GET", "/v1/offerings?"+q, nil, &offs, tn.token); code != 200 || len(offs.Offerings) == 0 {
		t.Fatalf("searching: %d %+v", code, offs)
	}
	var b block
	if code := call(t, url, "POST", "/v1/blocks", map[string]any{"offeringId": offs.Offerings[0].OfferingID, "clientToken": "buy-" + tn.team}, &b, tn.token); code != 201 {
		t.Fatalf("buying: %d", code)
	}
	return b
}

// run creates a job of the tenant's on a block running script with env.
func (tn tenant) run(t *testing.T, url, blockID, script string, env map[string]string) job {
	t.Helper()
	var j job
	if code := call(t, url, "POST", "/v1/jobs", map[string]any{"name": "j", "blockId": blockID, "command": []string{"/bin/sh", "-c", script},
		"env": env}, &j, tn.token); code != 201 {
		t.Fatalf("creating a job: %d", code)
	}
	return j
}

// waitJobState polls a job, as the tenant, until cond holds.
func (tn tenant) wait(t *testing.T, url, id string, cond func(job) bool) job {
	t.Helper()
	var j job
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		call(t, url, "GET", "/v1/jobs/"+id, nil, &j, tn.token)
		if cond(j) {
			return j
		}
	}
	t.Fatalf("job %s: %+v never reached the expected state", id, j)
	return j
}

// logOf reads a job instance's log through the API, as the tenant: from
// the start, or the last 4 KiB when tail is set.
func (tn tenant) logOf(t *testing.T, url, id string, tail bool) string {
	t.Helper()
	var out struct {
		Data string `json:"data"`
	}
	query := "instance=0&limit=1048576"
	if tail {
		query = "instance=0&offset=-4096"
	}
	if code := call(t, url, "GET", "/v1/jobs/"+id+"/logs?"+query, nil, &out, tn.token); code != 200 {
		t.Fatalf("reading the log of %s: %d", id, code)
	}
	return out.Data
}

// TestJobContainment runs the server binary as root, with its defaults,
// and a member's job that tries what an attacker would: read the
// database, the administrator's token, another team's checkpoint
// directory and log; signal the server or read its environment; write
// into the jobs directory; leave a process behind. Each is denied, and
// the process left behind is gone once the job ends.
func TestJobContainment(t *testing.T) {
	requireRoot(t)
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	bin := buildBinary(t)
	dir := passable(t, t.TempDir())
	db := filepath.Join(dir, "capblock.db")
	first, uids := testUIDRange()
	srv := startProcessWith(t, bin, db, ts(t0), "--job-uid-range", uids)
	useToken(t, srv.url, filepath.Join(dir, "admin.token"))
	jobsDir := filepath.Join(dir, "capblock-jobs")

	// 1. Two teams, each with an active one-GPU block.
	attacker, victim := newTenant(t, srv.url, "mallory"), newTenant(t, srv.url, "alice")
	start := t0.Add(time.Hour)
	ab, vb := attacker.buyL4(t, srv.url, start, 4), victim.buyL4(t, srv.url, start, 4)
	call(t, srv.url, "POST", "/v1/admin/clock", map[string]string{"advance": "1h"}, nil)

	// 2. The victim's job keeps a secret in its checkpoint directory and log.
	vj := victim.run(t, srv.url, vb.ID, `echo alice-secret > "$CAPBLOCK_CHECKPOINT_DIR/state"; echo alice-log-secret; id -u`, nil)
	victim.wait(t, srv.url, vj.ID, func(j job) bool { return j.State == "succeeded" })
	victimUID := strings.TrimSpace(strings.TrimPrefix(victim.logOf(t, srv.url, vj.ID, false), "alice-log-secret\n"))

	// 3. The attacker's job tries everything.
	tries := `
try() { if eval "$2" >/dev/null 2>&1; then echo "ALLOWED $1"; else echo "denied $1"; fi; }
try database 'cat "$DB"'
try database-wal 'cat "$DB-wal"'
try admin-token 'cat "$TOKEN"'
try other-checkpoint 'cat "$OTHER/` + vj.ID + `/checkpoint/state"'
try other-jobdir 'ls "$OTHER/` + vj.ID + `"'
try other-log 'cat "$OTHER/logs/` + vj.ID + `/instance-0.log"'
try logs-dir 'ls "$OTHER/logs"'
try jobs-dir-list 'ls "$OTHER"'
try jobs-dir-write 'touch "$OTHER/planted"'
try server-signal 'kill -0 "$SERVER"'
try server-environ 'cat /proc/"$SERVER"/environ'
try server-fds 'ls /proc/"$SERVER"/fd'
`
	probe := tries + `echo "uid $(id -u) gid $(id -g) groups $(id -G)"
setsid sleep 4242 &
sleep 4243 &
echo done
`
	targets := map[string]string{"DB": db, "TOKEN": filepath.Join(dir, "admin.token"), "OTHER": jobsDir, "SERVER": strconv.Itoa(srv.cmd.Process.Pid)}
	aj := attacker.run(t, srv.url, ab.ID, probe, targets)
	attacker.wait(t, srv.url, aj.ID, func(j job) bool { return j.State == "succeeded" })
	out := attacker.logOf(t, srv.url, aj.ID, false)
	if strings.Contains(out, "ALLOWED") || !strings.Contains(out, "done") {
		t.Fatalf("the attacker's job reached what is not its own:\n%s", out)
	}
	// 4. It ran as a user of its team's own, with no supplementary groups.
	var uid, gid int
	var groups string
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "uid ") {
			fmt.Sscanf(line, "uid %d gid %d groups %s", &uid, &gid, &groups)
		}
	}
	if uid < first || uid > first+99 || gid != uid || groups != strconv.Itoa(gid) || strconv.Itoa(uid) == victimUID {
		t.Fatalf("the attacker's job ran as uid %d gid %d groups %s (the victim's: %s), want a uid of its own from %s:\n%s", uid, gid, groups, victimUID, uids, out)
	}
	// 5. What it left running ended with it.
	waitNoProcess(t, "sleep 4242")
	waitNoProcess(t, "sleep 4243")
	// 6. The same tries as the server's user all succeed: each target is
	//    there, and each try would tell if it were reached.
	check := exec.Command("/bin/sh", "-c", tries)
	for k, v := range targets {
		check.Env = append(check.Env, k+"="+v)
	}
	check.Env = append(check.Env, "PATH="+os.Getenv("PATH"))
	asServer, err := check.Output()
	if err != nil || strings.Contains(string(asServer), "denied") {
		t.Fatalf("the same tries as the server's user: %v\n%s", err, asServer)
	}
	t.Logf("denied, as uid %d:\n%s", uid, out)
}

// TestJobLogCap: a job that prints 200 MB leaves at most the log limit on
// disk, and the newest output is what is kept.
func TestJobLogCap(t *testing.T) {
	requireRoot(t)
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	bin := buildBinary(t)
	dir := passable(t, t.TempDir())
	db := filepath.Join(dir, "capblock.db")
	_, uids := testUIDRange()
	srv := startProcessWith(t, bin, db, ts(t0), "--job-log-limit", "4MiB", "--job-uid-range", uids)
	useToken(t, srv.url, filepath.Join(dir, "admin.token"))
	tn := newTenant(t, srv.url, "printers")
	b := tn.buyL4(t, srv.url, t0.Add(time.Hour), 2)
	call(t, srv.url, "POST", "/v1/admin/clock", map[string]string{"advance": "1h"}, nil)
	j := tn.run(t, srv.url, b.ID, `echo first-line; head -c 209715200 /dev/zero | tr '\0' 'x'; echo; echo last-line`, nil)
	tn.wait(t, srv.url, j.ID, func(j job) bool { return j.State == "succeeded" })
	var onDisk int64
	logs := filepath.Join(dir, "capblock-jobs", "logs", j.ID)
	err := filepath.Walk(logs, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			onDisk += fi.Size()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if onDisk > 4<<20 || onDisk == 0 {
		t.Fatalf("the log takes %d bytes on disk, want at most 4 MiB", onDisk)
	}
	tail := tn.logOf(t, srv.url, j.ID, true)
	if !strings.HasSuffix(tail, "xxx\nlast-line\n") {
		t.Fatalf("the newest output is not kept: the log ends %q", tail[max(0, len(tail)-64):])
	}
	t.Logf("200 MiB printed, %d bytes kept on disk", onDisk)
}

// TestJobsShareNoGPU: two jobs on a one-GPU block never run at once; the
// second waits, pending, with a reason, and runs once the first ends.
func TestJobsShareNoGPU(t *testing.T) {
	e := start(t)
	runService(t, e)
	s := t0.Add(time.Hour)
	b, _ := e.buy(e.exact(searchQuery("l4.1x", 1, 4, s, s.Add(4*time.Hour)), 4, s).OfferingID, "one-gpu")
	e.advance(time.Hour)
	marks := filepath.Join(t.TempDir(), "marks")
	script := writeScript(t, `echo "start $(date +%s%N)" >> "`+marks+`.$1"; sleep 2; echo "end $(date +%s%N)" >> "`+marks+`.$1"`)
	var first, second job
	call(t, e.url, "POST", "/v1/jobs", map[string]any{"name": "a", "blockId": b.ID, "command": []string{script, "a"}}, &first)
	// The second comes once the first runs: two jobs created before the
	// runner's first pass start in the order of their ids.
	waitJob(t, e, first.ID, func(j job) bool { return j.State == "running" })
	call(t, e.url, "POST", "/v1/jobs", map[string]any{"name": "b", "blockId": b.ID, "command": []string{script, "b"}}, &second)
	// The first holds the GPU for 2 s: the second waits, saying why.
	waitJob(t, e, second.ID, func(j job) bool {
		return j.State == "pending" && strings.HasPrefix(j.Reason, "waiting_for_gpus: it needs 1 instances of block "+b.ID+" and 0 are free")
	})
	waitJob(t, e, first.ID, func(j job) bool { return j.State == "succeeded" })
	waitJob(t, e, second.ID, func(j job) bool { return j.State == "succeeded" })
	var spans [][2]int64
	for _, name := range []string{"a", "b"} {
		data, err := os.ReadFile(marks + "." + name)
		if err != nil {
			t.Fatal(err)
		}
		var span [2]int64
		if _, err := fmt.Sscanf(string(data), "start %d\nend %d\n", &span[0], &span[1]); err != nil {
			t.Fatalf("job %s's marks %q: %v", name, data, err)
		}
		spans = append(spans, span)
	}
	if spans[0][0] < spans[1][1] && spans[1][0] < spans[0][1] {
		t.Fatalf("two jobs ran on one GPU at once: %v", spans)
	}
}

// testUIDRange is a range of 100 job users within the default range, one
// per test process: servers of other databases on one machine refuse
// overlapping ranges, and test runs of other checkouts may be running
// theirs at the same time.
func testUIDRange() (first int, flag string) {
	first = 900000 + os.Getpid()%900*100
	return first, fmt.Sprintf("%d-%d", first, first+99)
}

// passable lets other users pass through dir and the directories above
// it (not list them), as a jobs directory's must be for jobs run as users
// of their own.
func passable(t *testing.T, dir string) string {
	t.Helper()
	for d := dir; d != filepath.Dir(d); d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&0o001 == 0 {
			if err := os.Chmod(d, fi.Mode().Perm()|0o011); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dir
}

// waitNoProcess waits up to 40 s (a stopped job's grace is 30 s) until no
// process has cmdline.
func waitNoProcess(t *testing.T, cmdline string) {
	t.Helper()
	for deadline := time.Now().Add(40 * time.Second); processRuns(cmdline); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("a process %q outlived its job", cmdline)
		}
	}
}

// TestTerminationEndsEveryProcess: at the block's termination time a job's
// processes end, those it started in sessions of their own too.
func TestTerminationEndsEveryProcess(t *testing.T) {
	requireRoot(t) // cgroups
	e := start(t)
	runService(t, e)
	s := t0.Add(time.Hour)
	b, _ := e.buy(e.exact(searchQuery("l4.1x", 1, 2, s, s.Add(2*time.Hour)), 2, s).OfferingID, "terminated")
	e.advance(time.Hour)
	var j job
	call(t, e.url, "POST", "/v1/jobs", map[string]any{"blockId": b.ID, "command": []string{"/bin/sh", "-c", "setsid sleep 4244 & exec sleep 4245"}}, &j)
	waitJob(t, e, j.ID, func(j job) bool { return j.State == "running" })
	for deadline := time.Now().Add(10 * time.Second); !processRuns("sleep 4244"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the job's setsid child never started")
		}
	}
	e.advance(90 * time.Minute) // 30 minutes before the end: terminating
	waitJob(t, e, j.ID, func(j job) bool { return j.State == "interrupted" })
	waitNoProcess(t, "sleep 4245")
	waitNoProcess(t, "sleep 4244")
}

// processRuns reports whether a process has cmdline.
func processRuns(cmdline string) bool {
	want := strings.ReplaceAll(cmdline, " ", "\x00")
	entries, _ := os.ReadDir("/proc")
	for _, d := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err == nil && strings.TrimRight(string(b), "\x00") == want {
			return true
		}
	}
	return false
}
