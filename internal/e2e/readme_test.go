package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReadmeWalkThroughs runs the README's walk-throughs as written, so
// that they never drift from the product: every command of every code
// block in a "## Walk-through: …" section, in order, with bash, in a fresh
// directory that holds what a checkout does (go.mod, go.sum, cmd, internal
// and examples, linked to this one), with HOME and XDG_CONFIG_HOME inside
// it, against the server the README itself builds and starts. A block
// whose fence names a language other than sh or bash (```text) is shown,
// not run. Every command must exit 0; then the test checks what the
// walk-throughs say they do: the block became active, then expired; the
// plan came in two segments; the job saved at SIGTERM in segment 1,
// resumed from that step in segment 2 and finished.
//
// The README's server listens on 127.0.0.1:${PORT:-8080}: the test sets
// PORT to a free port, since 8080 may be taken where the tests run.
func TestReadmeWalkThroughs(t *testing.T) {
	if testing.Short() {
		t.Skip("builds capblock and runs the README's walk-throughs")
	}
	if _, err := exec.LookPath("python3"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("python3 is not installed: the README's job runs examples/train.py (.ci/run installs it)")
		}
		t.Skip("python3 is not installed: the README's job runs examples/train.py")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	commands := walkThroughCommands(string(readme))
	if len(commands) < 20 {
		t.Fatalf("the README's walk-throughs have %d commands: %q", len(commands), commands)
	}

	// 1. Run them, one transcript for all, in a directory like a checkout.
	dir := walkThroughDir(t, root)
	out, runErr := runWalkThrough(t, dir, commands)
	tr := splitTranscript(out, len(commands))
	if runErr != nil || !tr.finished {
		i := tr.last
		log, _ := os.ReadFile(filepath.Join(dir, "capblock.log"))
		t.Fatalf("the README's walk-through failed at command %d of %d: %s\n%v\noutput:\n%s\nthe server's log (last lines):\n%s",
			i+1, len(commands), commands[i], runErr, tr.outputs[i], lastLines(string(log), 20))
	}
	// output is what the nth run of command printed; a command's trailing
	// comment is not part of it.
	output := func(command string, nth int) string {
		t.Helper()
		seen := 0
		for i, c := range commands {
			if before, _, ok := strings.Cut(c, " #"); ok {
				c = strings.TrimSpace(before)
			}
			if c == command {
				if seen == nth {
					return tr.outputs[i]
				}
				seen++
			}
		}
		t.Fatalf("the README has no command %q (the %d-th): update this test with the walk-through", command, nth+1)
		return ""
	}

	// 2. The block went live, then expired.
	wantLine(t, "blocks show after 2h", output("./capblock blocks show llama-eval", 0), `(?m)^state:\s+active$`)
	wantLine(t, "blocks show after 80h more", output("./capblock blocks show llama-eval", 1), `(?m)^state:\s+expired$`)
	events := output("./capblock events -f --until block.expired", 0)
	for _, typ := range []string{"block.purchased", "block.active", "block.expiration-warning", "block.terminating", "block.expired"} {
		wantLine(t, "events", events, `(?m)^\S+ \S+\s+`+regexp.QuoteMeta(typ)+`\s+cb-\S+\s+evt-`)
	}

	// 3. The plan came in two segments, and the job ran across them.
	plan := output("./capblock plans buy 1 --name llama-ft", 0)
	if segments := regexp.MustCompile(`(?m)^\d+\s+cb-\S+\s+scheduled\s`).FindAllString(plan, -1); len(segments) != 2 {
		t.Errorf("the plan has %d segments, want 2:\n%s", len(segments), plan)
	}
	wantLine(t, "events until the interruption", output("./capblock events -f --until job.interrupted -o wide", 0), `(?m)^\S+ \S+\s+job\.interrupted\s+job-\S+\s+evt-\S+\s.*capacity_ended`)
	logs := output("./capblock jobs logs train -f", 0)
	stopped := regexp.MustCompile(`(?m)^rank 0: SIGTERM: stopped at step (\d+)$`).FindStringSubmatchIndex(logs)
	resumed := regexp.MustCompile(`(?m)^rank 0: resuming from step (\d+) of 240$`).FindStringSubmatchIndex(logs)
	done := regexp.MustCompile(`(?m)^rank 0: done: 240 steps$`).FindStringIndex(logs)
	switch {
	case stopped == nil || resumed == nil || done == nil || !(stopped[0] < resumed[0] && resumed[0] < done[0]):
		t.Errorf("the job's log does not show a stop at SIGTERM, a resume and the end, in that order:\n%s", logs)
	case logs[stopped[2]:stopped[3]] != logs[resumed[2]:resumed[3]]:
		t.Errorf("stopped at step %s, resumed from step %s:\n%s", logs[stopped[2]:stopped[3]], logs[resumed[2]:resumed[3]], logs)
	default:
		if n, _ := strconv.Atoi(logs[resumed[2]:resumed[3]]); n < 20 {
			t.Errorf("resumed from step %d, before the step 20 the walk-through waited for:\n%s", n, logs)
		}
	}
	wantLine(t, "jobs show at the end", output("./capblock jobs show train", 0), `(?m)^state:\s+succeeded$`)
}

// walkThroughCommands returns the commands of the README's walk-throughs:
// the lines of the code blocks of its "## Walk-through: …" sections whose
// fence names no language, sh or bash, joined where a line ends in a
// backslash, blank lines and whole-line comments left out.
func walkThroughCommands(readme string) []string {
	var (
		commands             []string
		inWalk, inBlock, run bool
		pending              string
	)
	for _, line := range strings.Split(readme, "\n") {
		switch {
		case !inBlock && strings.HasPrefix(line, "## "):
			inWalk = strings.HasPrefix(line, "## Walk-through: ")
		case !inBlock && strings.HasPrefix(line, "```"):
			lang := strings.TrimSpace(strings.TrimPrefix(line, "```"))
			inBlock, run = true, inWalk && (lang == "" || lang == "sh" || lang == "bash")
		case inBlock && strings.TrimSpace(line) == "```":
			inBlock = false
		case inBlock && run:
			if cont, ok := strings.CutSuffix(line, "\\"); ok {
				pending += cont
				continue
			}
			line = strings.TrimSpace(pending + line)
			pending = ""
			if line != "" && !strings.HasPrefix(line, "#") {
				commands = append(commands, line)
			}
		}
	}
	return commands
}

// walkThroughDir makes a fresh directory that holds what the README's
// commands need of a checkout, linked to root, and a home of its own.
// Others may pass through it: a server run as root runs a job as a user
// of its own, in the jobs directory inside.
func walkThroughDir(t *testing.T, root string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "capblock-readme-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"go.mod", "go.sum", "cmd", "internal", "examples"} {
		if err := os.Symlink(filepath.Join(root, name), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "home"), 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

// readmeMarker starts the output of each command in the transcript.
const readmeMarker = "@@readme-command "

// runWalkThrough runs commands with bash in dir, stopping at the first
// that fails, and returns the transcript: each command's output (stdout
// and stderr) after a marker line with its index. The commands are as
// written; only the markers come between them. It ends the process group
// of bash when done, the README's background server included.
func runWalkThrough(t *testing.T, dir string, commands []string) (string, error) {
	t.Helper()
	var script strings.Builder
	script.WriteString("set -eo pipefail\n")
	for i, c := range commands {
		fmt.Fprintf(&script, "printf '\\n%s%d\\n'\n%s\n", readmeMarker, i, c)
	}
	fmt.Fprintf(&script, "printf '\\n%send\\n'\n", readmeMarker)
	scriptPath := filepath.Join(dir, "walk-through.sh")
	if err := os.WriteFile(scriptPath, []byte(script.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	// A file, not a pipe: the background server inherits it, and a pipe
	// would keep Wait waiting for the server.
	transcript, err := os.Create(filepath.Join(dir, "transcript.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer transcript.Close()

	ctx, cancel := context.WithTimeout(t.Context(), 12*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", scriptPath)
	cmd.Dir = dir
	cmd.Env = walkThroughEnv(t, dir)
	cmd.Stdout, cmd.Stderr = transcript, transcript
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	runErr := cmd.Run()
	if cmd.Process != nil {
		endGroup(t, cmd.Process.Pid)
	}
	out, err := os.ReadFile(transcript.Name())
	if err != nil {
		t.Fatal(err)
	}
	if ctx.Err() != nil {
		runErr = fmt.Errorf("%w: the walk-through took longer than 12 minutes", ctx.Err())
	}
	return string(out), runErr
}

// walkThroughEnv is the environment of the walk-through: this one without
// capblock's variables, with HOME, XDG_CONFIG_HOME and PORT of its own,
// and Go's caches and settings where they are now, so that the README's
// go build finds them under the new HOME.
func walkThroughEnv(t *testing.T, dir string) []string {
	t.Helper()
	goEnv, err := exec.Command("go", "env", "GOCACHE", "GOMODCACHE", "GOPATH", "GOENV").Output()
	if err != nil {
		t.Fatalf("go env: %v", err)
	}
	values := strings.Split(strings.TrimSpace(string(goEnv)), "\n")
	if len(values) != 4 {
		t.Fatalf("go env printed %q", goEnv)
	}
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(k, "CAPBLOCK_"), k == "HOME", k == "XDG_CONFIG_HOME", k == "PORT",
			k == "GOCACHE", k == "GOMODCACHE", k == "GOPATH", k == "GOENV":
			continue
		}
		env = append(env, kv)
	}
	home := filepath.Join(dir, "home")
	_, port, err := net.SplitHostPort(freeAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	return append(env, "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"), "PORT="+port,
		"GOCACHE="+values[0], "GOMODCACHE="+values[1], "GOPATH="+values[2], "GOENV="+values[3])
}

// endGroup ends what is left of the process group pgid: SIGTERM, then
// SIGKILL after 15 seconds.
func endGroup(t *testing.T, pgid int) {
	t.Helper()
	if err := syscall.Kill(-pgid, syscall.SIGTERM); errors.Is(err, syscall.ESRCH) {
		return
	}
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
			return
		}
	}
	t.Errorf("the walk-through's processes did not end on SIGTERM within 15s: killing them")
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}

// transcript is a walk-through's output, command by command.
type transcript struct {
	outputs  []string // by command index
	last     int      // the index of the last command that started
	finished bool     // every command ran
}

// splitTranscript cuts out at its markers.
func splitTranscript(out string, n int) transcript {
	tr := transcript{outputs: make([]string, n)}
	current := -1
	var b strings.Builder
	flush := func() {
		if current >= 0 && current < n {
			tr.outputs[current] = strings.TrimPrefix(b.String(), "\n")
		}
		b.Reset()
	}
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, readmeMarker); ok {
			flush()
			if rest == "end" {
				tr.finished, current = true, n
				continue
			}
			current, _ = strconv.Atoi(rest)
			tr.last = current
			continue
		}
		b.WriteString(line + "\n")
	}
	flush()
	for i := range tr.outputs {
		tr.outputs[i] = strings.TrimSuffix(tr.outputs[i], "\n")
	}
	return tr
}

// wantLine fails the test when output has no match of pattern.
func wantLine(t *testing.T, what, output, pattern string) {
	t.Helper()
	if !regexp.MustCompile(pattern).MatchString(output) {
		t.Errorf("%s: no line matches %s in:\n%s", what, pattern, output)
	}
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
