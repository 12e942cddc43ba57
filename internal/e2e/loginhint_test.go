package e2e

import (
	"bufio"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestLoginHintNamesOnlyAWrittenFile: the first start writes the token
// file and says to log in with it; a later start on the same database
// with another --admin-token-file, where no file is, does not tell the
// user to log in with a file it never wrote.
func TestLoginHintNamesOnlyAWrittenFile(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the server binary")
	}
	bin, dir := buildBinary(t), t.TempDir()
	db := filepath.Join(dir, "capblock.db")
	first := loginHintOf(t, bin, db, filepath.Join(dir, "admin.token"))
	if !strings.Contains(first, "--token-file "+filepath.Join(dir, "admin.token")+" ") {
		t.Errorf("the first start's hint: %q; want its token file", first)
	}
	other := filepath.Join(dir, "elsewhere", "admin.token")
	second := loginHintOf(t, bin, db, other)
	if !strings.Contains(second, "--token-file FILE") || !strings.Contains(second, "wrote no token to "+other) {
		t.Errorf("the second start's hint: %q; want it to say it wrote no token", second)
	}
}

// loginHintOf starts the server on db, returns its "try:" line, and
// stops it.
func loginHintOf(t *testing.T, bin, db, tokenFile string) string {
	t.Helper()
	cmd := exec.Command(bin, "serve", "--db", db, "--listen", "127.0.0.1:0", "--admin-token-file", tokenFile)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	hint := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "try: capblock login") {
				hint <- sc.Text()
				return
			}
		}
	}()
	select {
	case h := <-hint:
		return h
	case <-time.After(30 * time.Second):
		t.Fatal("the server printed no login hint within 30s")
		return ""
	}
}
