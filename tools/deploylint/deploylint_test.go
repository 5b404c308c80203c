package deploylint

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// root is the repository root, seen from this package's directory.
const root = "../.."

func read(t *testing.T, rel string) []byte {
	t.Helper()
	dt, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return dt
}

func report(t *testing.T, fs []Finding) {
	t.Helper()
	if len(fs) > 0 {
		t.Errorf("%d finding(s):\n%s", len(fs), Format(fs))
	}
}

func goModVersion(t *testing.T) string {
	m := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(read(t, "go.mod"))
	if m == nil {
		t.Fatal("go.mod has no go directive")
	}
	return string(m[1])
}

func TestDockerfile(t *testing.T) {
	fs, err := LintDockerfile("Dockerfile", read(t, "Dockerfile"), DockerfileOptions{GoVersion: goModVersion(t)})
	if err != nil {
		t.Fatal(err)
	}
	report(t, fs)
}

func TestDockerignore(t *testing.T) {
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() && (rel == ".git" || rel == "tools") {
			return filepath.SkipDir
		}
		if !d.IsDir() && rel != ".git" {
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	fs, err := CheckDockerignore(".dockerignore", read(t, ".dockerignore"), files)
	if err != nil {
		t.Fatal(err)
	}
	report(t, fs)
}

func TestCompose(t *testing.T) {
	fs, err := CheckCompose(filepath.Join(root, "deploy/compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	report(t, fs)
}

func TestSystemdUnit(t *testing.T) {
	report(t, CheckUnit("deploy/timemachine.service", read(t, "deploy/timemachine.service")))
}

// systemd-analyze is part of systemd, which Debian machines (and CI's) have;
// where it is missing the structural check above still runs.
func TestSystemdAnalyze(t *testing.T) {
	standIn, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	fs, ran, err := SystemdAnalyze(filepath.Join(root, "deploy/timemachine.service"), standIn, 2.5)
	if err != nil {
		t.Fatal(err)
	}
	if !ran {
		t.Skip("systemd-analyze not installed")
	}
	report(t, fs)
}

// The example environment file sets only real server flags: checked against
// `timemachine server --help` of the binary `make build` made, when there is
// one (make exports TIMEMACHINE_BIN).
func TestEnvFile(t *testing.T) {
	fs, keys := CheckEnvFile("deploy/timemachine.env", read(t, "deploy/timemachine.env"))
	report(t, fs)
	if len(keys) == 0 {
		t.Fatal("the example sets nothing")
	}
	bin := os.Getenv("TIMEMACHINE_BIN")
	if bin == "" {
		t.Skip("TIMEMACHINE_BIN not set: keys not compared with the server's flags")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("%s: %v (run make build): keys not compared with the server's flags", bin, err)
	}
	help, err := exec.Command(bin, "server", "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("%s server --help: %v\n%s", bin, err, help)
	}
	for _, k := range keys {
		name, ok := strings.CutPrefix(k, "TIMEMACHINE_")
		if !ok {
			continue
		}
		flag := "--" + strings.ReplaceAll(strings.ToLower(name), "_", "-")
		if !regexp.MustCompile(`(?m)^\s+(-\w, )?` + regexp.QuoteMeta(flag) + `\b`).Match(help) {
			t.Errorf("deploy/timemachine.env sets %s, but the server has no %s flag", k, flag)
		}
	}
}
