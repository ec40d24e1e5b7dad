package layering

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/spoolhq/spool/"

// rule forbids the packages matching from to import, directly or not, the
// packages matching any of not. A pattern is a package path relative to
// the module; one ending in "/..." matches the package and those below.
type rule struct {
	from string
	not  []string
	why  string
}

var rules = []rule{
	{"engine/remotefront", []string{"engine/server", "engine/local"}, "the remote front is an engine beside the local one: neither calls into the other or into the server"},
	{"engine/local", []string{"engine/server", "engine/remotefront", "engine/httpguard", "engine/api/..."}, "the local engine runs turns: it speaks no API and serves no HTTP"},
	{"engine/turn", []string{"engine/local", "engine/remotefront", "engine/server", "engine/scheduler", "engine/model", "engine/host"}, "a turn is the same whichever engine runs it"},
	{"engine/glm", []string{"engine/turn", "engine/local", "engine/server", "engine/scheduler"}, "the GLM dialect is the model's markup, not a way of serving it"},
	{"engine/api/...", []string{"engine/server", "engine/local", "engine/remotefront", "engine/host", "engine/scheduler"}, "an API package translates between its wire and the turn, whichever engine answers"},
	{"engine/apiwire", []string{"engine/server", "engine/local", "engine/remotefront", "engine/turn", "engine/scheduler"}, "the wire shapes know no engine"},
	{"engine/access", []string{"engine/server", "engine/local", "engine/remotefront", "engine/turn", "engine/api/..."}, "a request's access record is what the server and the remote front note in it, below both"},
	{"engine/status", []string{"engine/server", "engine/local", "engine/host"}, "the status is read by the server and the app, not the other way"},
	{"engine/server", []string{"engine/host", "engine/bench"}, "the server serves what the composition root built"},
	{"engine/scheduler", []string{"engine/server", "engine/local", "engine/turn", "engine/host"}, "the scheduler batches tokens; it knows no turn or API"},
	{"engine/generate", []string{"engine/scheduler", "engine/server", "engine/local", "engine/host"}, "the decode core is below the scheduler"},
	{"engine/model", []string{"engine/generate", "engine/scheduler", "engine/server", "engine/host", "engine/loader"}, "the model is pure computation"},
	{"kernels/...", []string{"engine/..."}, "kernels compute; they know no engine"},
	{"internal/...", []string{"engine/server", "engine/host", "engine/local"}, "the module's internals are below the engine's top"},
}

// loadOpeners are the packages whose non-test code may call loader.Open:
// the composition root, the loader itself, and test support.
var loadOpeners = []string{"engine/host", "engine/loader", "internal/fixturemodel"}

// graph is the module's packages and their imports within the module, read
// from the non-test sources (every build tag included).
type graph struct {
	imports map[string][]string
	// opens lists the files of each package that call loader.Open.
	opens map[string][]string
}

func root(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatalf("the module root: %v", err)
	}
	return dir
}

func readGraph(t *testing.T) *graph {
	t.Helper()
	base := root(t)
	g := &graph{imports: map[string][]string{}, opens: map[string][]string{}}
	fset := token.NewFileSet()
	err := filepath.WalkDir(base, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != base && (strings.HasPrefix(name, ".") || name == "node_modules" || name == "testdata" || name == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(base, filepath.Dir(path))
		pkg := filepath.ToSlash(rel)
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		loaderName := ""
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if !strings.HasPrefix(p, module) {
				continue
			}
			p = strings.TrimPrefix(p, module)
			if !slices.Contains(g.imports[pkg], p) {
				g.imports[pkg] = append(g.imports[pkg], p)
			}
			if p == "engine/loader" {
				loaderName = "loader"
				if imp.Name != nil {
					loaderName = imp.Name.Name
				}
			}
		}
		if _, ok := g.imports[pkg]; !ok {
			g.imports[pkg] = nil
		}
		if loaderName != "" && callsOpen(t, path, loaderName) {
			g.opens[pkg] = append(g.opens[pkg], filepath.Base(path))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// callsOpen reports whether the file calls NAME.Open.
func callsOpen(t *testing.T, path, name string) bool {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	ast.Inspect(f, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok && sel.Sel.Name == "Open" {
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == name {
				found = true
			}
		}
		return !found
	})
	return found
}

func matches(pattern, pkg string) bool {
	if p, ok := strings.CutSuffix(pattern, "/..."); ok {
		return pkg == p || strings.HasPrefix(pkg, p+"/")
	}
	return pkg == pattern
}

// path is an import path from pkg to a package matching target, or nil.
func (g *graph) path(pkg, target string) []string {
	seen := map[string]bool{pkg: true}
	prev := map[string]string{}
	queue := []string{pkg}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, q := range g.imports[p] {
			if seen[q] {
				continue
			}
			seen[q], prev[q] = true, p
			if matches(target, q) {
				out := []string{q}
				for at := q; at != pkg; {
					at = prev[at]
					out = append([]string{at}, out...)
				}
				return out
			}
			queue = append(queue, q)
		}
	}
	return nil
}

func TestImportRules(t *testing.T) {
	g := readGraph(t)
	if len(g.imports) < 50 {
		t.Fatalf("read %d packages: the walk missed the module", len(g.imports))
	}
	for _, r := range rules {
		matched := false
		for pkg := range g.imports {
			if !matches(r.from, pkg) {
				continue
			}
			matched = true
			for _, not := range r.not {
				if p := g.path(pkg, not); p != nil {
					t.Errorf("%s imports %s (%s): %s", pkg, not, strings.Join(p, " -> "), r.why)
				}
			}
		}
		if !matched && !strings.HasSuffix(r.from, "/...") {
			t.Errorf("the rule's package %s does not exist", r.from)
		}
	}
}

// TestModelsOpenInTheCompositionRoot: engines are opened through
// engine/host, so that what runs, serves and is measured is put together
// one way.
func TestModelsOpenInTheCompositionRoot(t *testing.T) {
	g := readGraph(t)
	for pkg, files := range g.opens {
		if !slices.Contains(loadOpeners, pkg) {
			t.Errorf("%s calls loader.Open (%s): open engines with host.Open", pkg, strings.Join(files, ", "))
		}
	}
}

// TestRulesBite: the checks find a path that breaks a rule and a call that
// breaks the other, so that a rule that matches nothing is not mistaken
// for one that holds.
func TestRulesBite(t *testing.T) {
	g := &graph{imports: map[string][]string{
		"engine/remotefront": {"engine/apiwire", "engine/x"},
		"engine/x":           {"engine/server"},
	}}
	if p := g.path("engine/remotefront", "engine/server"); strings.Join(p, " ") != "engine/remotefront engine/x engine/server" {
		t.Errorf("path %v", p)
	}
	if g.path("engine/apiwire", "engine/server") != nil || !matches("engine/api/...", "engine/api/openai") || matches("engine/api/...", "engine/apiwire") {
		t.Error("patterns")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "x.go")
	os.WriteFile(src, []byte("package x\nimport ld \"github.com/spoolhq/spool/engine/loader\"\nfunc f() { ld.Open(nil, \"\", ld.Options{}) }\n"), 0o644)
	if !callsOpen(t, src, "ld") || callsOpen(t, src, "loader") {
		t.Error("callsOpen")
	}
}
