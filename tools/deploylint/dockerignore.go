package deploylint

import (
	"bytes"
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
)

// mustIgnore are paths that never belong in the build context: history,
// build output, local data, the separate tools module.
var mustIgnore = []string{
	".git/HEAD",
	"bin/timemachine",
	"dist/SHA256SUMS",
	"data/pebble/MANIFEST-000001",
	".cluster/n1/LOCK",
	"timemachine", // a binary built in the repository root
	"tools/deploylint/go.mod",
}

// CheckDockerignore reads a .dockerignore with BuildKit's pattern matcher
// and checks it against the repository's files (slash-separated paths
// relative to the context root): go.mod, go.sum and every file in or below a
// directory of the main module's non-test Go sources (embedded assets live
// there) must stay in the context; mustIgnore must not.
func CheckDockerignore(file string, dt []byte, repoFiles []string) ([]Finding, error) {
	c := &collector{file: file}
	patterns, err := ignorefile.ReadAll(bytes.NewReader(dt))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	pm, err := patternmatcher.New(patterns)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	ignored := func(p string) bool {
		m, err := pm.MatchesOrParentMatches(p)
		return err == nil && m
	}
	for _, p := range mustIgnore {
		if !ignored(p) {
			c.add(0, "TM-context", "%s would be sent to the build context", p)
		}
	}
	srcDirs := map[string]bool{}
	for _, f := range repoFiles {
		if strings.HasSuffix(f, ".go") && !strings.HasSuffix(f, "_test.go") && !strings.HasPrefix(f, "tools/") {
			srcDirs[path.Dir(f)] = true
		}
	}
	// A file in a package's directory or below it may be compiled or
	// embedded (//go:embed ui/dist); test files are not built.
	inPackage := func(f string) bool {
		for d := path.Dir(f); d != "." && d != "/"; d = path.Dir(d) {
			if srcDirs[d] {
				return true
			}
		}
		return false
	}
	var missing []string
	for _, f := range repoFiles {
		need := f == "go.mod" || f == "go.sum" || (inPackage(f) && !strings.HasSuffix(f, "_test.go"))
		if need && ignored(f) {
			missing = append(missing, f)
		}
	}
	sort.Strings(missing)
	for _, f := range missing {
		c.add(0, "TM-context", "%s is needed by the build but ignored", f)
	}
	return c.out, nil
}
