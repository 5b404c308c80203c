package layout

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/timemachine-db/timemachine/"

// layers is the layout of docs/architecture.md#layout, top to bottom: a
// package may import only packages of a later line. Packages on one line
// do not import each other.
var layers = [][]string{
	{"cmd/timemachine"},
	{"node"},
	{"service"},
	{"cluster"},
	{"forward"},
	{"meta", "slot"},
	{"raftgroup"},
	{"raftfsm"},
	{"dht", "storage", "liveness", "inflight"},
	{"rpc/httpapi"},
	{"rpc/beat"},
	{"rpc/webhook", "rpc/peer", "rpc/console", "rpc/openapi"},
	{"rpc/mux"},
	{"auth", "tlsconf", "secrets", "recur", "tune"},
	{"model"},
}

// outside the layers: the Go client and its helpers (imported by cmd only),
// test tooling (e2e and everything under internal/, which may import each
// other and the layers), and packages with nothing but docs.
var outside = map[string]bool{"client": true, "client/bench": true, "client/webhook": true, "client/clienttest": true,
	"rpc": true, "e2e": true}

func isOutside(pkg string) bool { return outside[pkg] || strings.HasPrefix(pkg, "internal/") }

func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test's directory")
		}
		dir = parent
	}
}

// imports maps every package of the module (relative path) to the imports
// of its non-test files.
func imports(t *testing.T, root string) map[string]map[string]bool {
	t.Helper()
	out := map[string]map[string]bool{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "bin") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil && path != root {
				return filepath.SkipDir // a module of its own (tools/deploylint)
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		rel = filepath.ToSlash(rel)
		if out[rel] == nil {
			out[rel] = map[string]bool{}
		}
		for _, imp := range f.Imports {
			out[rel][strings.Trim(imp.Path.Value, `"`)] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestImportsPointDown(t *testing.T) {
	rank := map[string]int{}
	for i, line := range layers {
		for _, p := range line {
			rank[p] = i
		}
	}
	pkgs := imports(t, moduleRoot(t))
	for pkg, imps := range pkgs {
		r, layered := rank[pkg]
		if !layered && !isOutside(pkg) {
			t.Errorf("package %s is in no layer: add it to docs/architecture.md#layout and to this test", pkg)
			continue
		}
		for imp := range imps {
			if !strings.HasPrefix(imp, module) {
				continue
			}
			dep := strings.TrimPrefix(imp, module)
			if !layered {
				continue
			}
			if strings.HasPrefix(dep, "internal/") {
				t.Errorf("%s imports %s: internal/ is for tests only", pkg, dep)
				continue
			}
			if dr, ok := rank[dep]; !ok {
				if dep != "client" && dep != "client/bench" || pkg != "cmd/timemachine" {
					t.Errorf("%s imports %s, which is in no layer", pkg, dep)
				}
			} else if dr <= r {
				t.Errorf("%s imports %s: imports must point down the layers (%d → %d)", pkg, dep, r, dr)
			}
		}
	}
}

// model is the domain: the standard library only.
func TestModelImportsOnlyTheStandardLibrary(t *testing.T) {
	for imp := range imports(t, moduleRoot(t))["model"] {
		if first, _, _ := strings.Cut(imp, "/"); strings.Contains(first, ".") {
			t.Errorf("model imports %s", imp)
		}
	}
}

// The HTTP layer speaks model; raft, bbolt and Pebble stay below the
// service (go list -deps ./rpc/httpapi shows the same, transitively).
func TestHTTPLayerReachesNoStorageOrRaft(t *testing.T) {
	pkgs := imports(t, moduleRoot(t))
	seen := map[string]bool{}
	var walk func(pkg string)
	walk = func(pkg string) {
		if seen[pkg] {
			return
		}
		seen[pkg] = true
		for imp := range pkgs[pkg] {
			for _, bad := range []string{"hashicorp/raft", "bbolt", "boltdb", "pebble"} {
				if strings.Contains(imp, bad) {
					t.Errorf("rpc/httpapi reaches %s (through %s)", imp, pkg)
				}
			}
			if strings.HasPrefix(imp, module) {
				walk(strings.TrimPrefix(imp, module))
			}
		}
	}
	walk("rpc/httpapi")
}
