package executor

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// EnvParams is what capblock tells one instance of a job about its place in
// the world. JobEnv turns it into environment variables.
type EnvParams struct {
	BlockID string
	PlanID  string
	// SegmentEnd is when the instance's segment ends; the process is sent
	// SIGTERM before then and should have checkpointed by that time.
	SegmentEnd time.Time
	// CheckpointDir is the job's directory that survives restarts and
	// segments.
	CheckpointDir string
	RestartCount  int
	Rank          int
	WorldSize     int
	MasterAddr    string
	MasterPort    int
	// GPUs are the indices of the GPUs given to the instance. An empty list
	// sets CUDA_VISIBLE_DEVICES to "", which hides every GPU: an instance
	// sees only what it was given.
	GPUs []int
	// KillAtFile, when set, is a file the instance may read for when it
	// will be killed (RFC 3339), rewritten when that is decided anew.
	KillAtFile string
	// User is the environment the user asked for. capblock's variables win
	// over it.
	User map[string]string
}

// JobEnv returns the environment of one job instance: the user's variables
// overlaid with capblock's own.
func JobEnv(p EnvParams) map[string]string {
	env := make(map[string]string, len(p.User)+11)
	for k, v := range p.User {
		env[k] = v
	}
	gpus := make([]string, len(p.GPUs))
	for i, g := range p.GPUs {
		gpus[i] = strconv.Itoa(g)
	}
	end := p.SegmentEnd.UTC()
	env["CAPBLOCK_BLOCK_ID"] = p.BlockID
	env["CAPBLOCK_PLAN_ID"] = p.PlanID
	env["CAPBLOCK_SEGMENT_END"] = end.Format(time.RFC3339)
	env["CAPBLOCK_SEGMENT_END_MS"] = strconv.FormatInt(end.UnixMilli(), 10)
	env["CAPBLOCK_CHECKPOINT_DIR"] = p.CheckpointDir
	env["CAPBLOCK_RESTART_COUNT"] = strconv.Itoa(p.RestartCount)
	env["RANK"] = strconv.Itoa(p.Rank)
	env["WORLD_SIZE"] = strconv.Itoa(p.WorldSize)
	env["MASTER_ADDR"] = p.MasterAddr
	env["MASTER_PORT"] = strconv.Itoa(p.MasterPort)
	env["CUDA_VISIBLE_DEVICES"] = strings.Join(gpus, ",")
	if p.KillAtFile != "" {
		env["CAPBLOCK_KILL_AT_FILE"] = p.KillAtFile
	}
	return env
}

// DefaultPath is the PATH of a job that does not set its own: the
// system's program directories. The server's own PATH is never passed
// on: a root server's names folders of root's (a pyenv's shims, a
// toolchain under /root) that a job should neither depend on nor be
// handed.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// baseEnv is what every instance's environment starts from. Nothing is
// taken from the server's own environment (credentials, the server's
// configuration, its PATH): a job's environment is the same whoever
// started the server and how. HOME is the working directory where there
// is one (the local engine sets it to the job's directory anyway);
// TMPDIR is /tmp, which is the instance's own where Limits.TmpBytes
// applies.
func baseEnv(dir string) map[string]string {
	home := "/"
	if dir != "" {
		home = dir
	}
	return map[string]string{"PATH": DefaultPath, "HOME": home, "LANG": "C.UTF-8", "TMPDIR": "/tmp"}
}

// childEnv returns the process environment of an instance whose working
// directory is dir: baseEnv overlaid with the spec's variables, sorted so
// that it is reproducible.
func childEnv(spec map[string]string, dir string) ([]string, error) {
	env := baseEnv(dir)
	for k, v := range spec {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return nil, fmt.Errorf("environment variable name %q is invalid", k)
		}
		if strings.ContainsRune(v, 0) {
			return nil, fmt.Errorf("environment variable %s contains a NUL byte", k)
		}
		env[k] = v
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out, nil
}

// lookupEnv finds a variable in an environment built by childEnv.
func lookupEnv(env []string, key string) string {
	for _, kv := range env {
		if k, v, _ := strings.Cut(kv, "="); k == key {
			return v
		}
	}
	return ""
}

// resolveCommand finds the executable that name refers to, the way a shell
// would for the child: a name with a slash is a path (relative to dir), any
// other name is looked up in the child's PATH. Relative PATH entries are
// skipped, as os/exec does, so that a job cannot pick up a file from an
// unexpected working directory. Resolving here turns a missing command into
// an error from Start rather than an exit status of 127.
func resolveCommand(name, dir, path string) (string, error) {
	if strings.Contains(name, "/") {
		p := name
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			return "", fmt.Errorf("resolving command %s: %w", name, err)
		}
		if err := checkExecutable(abs); err != nil {
			return "", fmt.Errorf("resolving command %s: %w", name, err)
		}
		return abs, nil
	}
	for _, d := range filepath.SplitList(path) {
		if !filepath.IsAbs(d) {
			continue
		}
		p := filepath.Join(d, name)
		if checkExecutable(p) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("resolving command %s: not found in PATH %q", name, path)
}

func checkExecutable(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file", path)
	}
	return nil
}
