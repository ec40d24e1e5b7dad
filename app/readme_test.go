package main

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// The README's examples are tests. Each fenced block of README.md has an
// info string that says how it is checked (the README's last section
// documents the same table for its readers):
//
//	sh          every command runs as written, one shell each, in order, from
//	            a directory laid out as the repository root: bin/spool is this
//	            test binary running spool's main, HOME is fresh, /tmp/ is a
//	            temporary directory. A command must exit 0, or with the status
//	            its trailing comment names ("# exit status 3"). A bin/spool
//	            command with --json, and a curl, must print JSON. A
//	            "bin/spool serve" line starts the server on a free port (which
//	            replaces 127.0.0.1:8484 in the block's later lines); the other
//	            lines run against it, then it is interrupted and must exit 0.
//	sh check    what CI cannot run (a Mac, a GPU, the 357 GiB download, minutes
//	            of work): make targets must be defined in the Makefile or
//	            mk/*.mk, bin/spool commands must exist and parse with every flag
//	            and argument given, a repository script must be executable, any
//	            other program must be installed.
//	output      every line must appear, white space collapsed, in the stdout
//	            of the last command of the sh block just before it.
//	toml codex  every setting must be one that make agents (agents.test.js)
//	            gives Codex, base_url and wire_api included.
//
// Any other block fails the test, so nothing in the README goes unchecked.
// The prose is checked too: TestREADMEFlags, TestREADMETestNames and
// TestREADMELayout.

// readmeMinRun and readmeMinChecked are floors on the commands the README
// test runs and checks: a README whose examples lost their fences, or a
// parser that stopped finding them, fails instead of passing on nothing.
const (
	readmeMinRun     = 20
	readmeMinChecked = 20
)

// readmePlaceholderAddr is the address README examples use for the server.
const readmePlaceholderAddr = "127.0.0.1:8484"

func readREADME(t *testing.T) (string, string) {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	text, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	return root, string(text)
}

func TestREADMEExamples(t *testing.T) {
	repo, text := readREADME(t)
	blocks, _ := readmeBlocks(text)
	env := newReadmeEnv(t, repo)
	ran, checked := 0, 0
	var last *readmeResult
	used := map[string]bool{} // spool commands the examples use
	for i, b := range blocks {
		switch b.info {
		case "sh":
			results := env.runBlock(t, b)
			ran += len(results)
			if len(results) > 0 {
				last = &results[len(results)-1]
			}
			noteSpoolCommands(b, used)
		case "sh check":
			checked += checkBlock(t, repo, b)
			noteSpoolCommands(b, used)
		case "output":
			if i == 0 || blocks[i-1].info != "sh" || last == nil {
				t.Errorf("README.md:%d: an output block must follow an sh block", b.line)
				continue
			}
			checkOutput(t, b, *last)
		case "toml codex":
			checkCodexConfig(t, repo, b)
		default:
			t.Errorf("README.md:%d: a ```%s block; the README test knows sh, sh check, output and toml codex (app/readme_test.go)", b.line, b.info)
		}
	}
	t.Logf("README.md: %d commands run, %d checked, in %d blocks", ran, checked, len(blocks))
	if ran < readmeMinRun || checked < readmeMinChecked {
		t.Errorf("README.md: %d commands run and %d checked, want at least %d and %d", ran, checked, readmeMinRun, readmeMinChecked)
	}
	for _, c := range newRootCmd().Commands() {
		if c.IsAvailableCommand() && !used[c.Name()] {
			t.Errorf("README.md: no example uses spool %s", c.Name())
		}
	}
}

// TestREADMEFlags: every --flag the README's prose names in code is a flag
// of some spool command.
func TestREADMEFlags(t *testing.T) {
	_, text := readREADME(t)
	_, prose := readmeBlocks(text)
	known := map[string]bool{}
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) { known[f.Name] = true })
		c.PersistentFlags().VisitAll(func(f *pflag.Flag) { known[f.Name] = true })
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(newRootCmd())
	flags := inlineFlags(prose)
	for _, f := range flags {
		if !known[f] {
			t.Errorf("README.md names --%s, which no spool command has", f)
		}
	}
	if len(flags) < 20 {
		t.Errorf("found %d inline flags in README.md; the parser is broken", len(flags))
	}
}

// TestREADMETestNames: every test the README names (`TestXxx`, or
// `TestXxx*` for a family) is a test function of the tree, so the
// exactness table cannot point at a test that was renamed or removed.
func TestREADMETestNames(t *testing.T) {
	repo, text := readREADME(t)
	_, prose := readmeBlocks(text)
	named := regexp.MustCompile("`(Test[A-Za-z0-9_]+)(\\*?)`").FindAllStringSubmatch(prose, -1)
	if len(named) < 20 {
		t.Fatalf("README.md names %d tests; the exactness table should name more", len(named))
	}
	var funcs []string
	decl := regexp.MustCompile(`(?m)^func (Test[A-Za-z0-9_]+)\(`)
	err := filepath.WalkDir(repo, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || (path != repo && strings.HasPrefix(d.Name(), "."))) {
			return filepath.SkipDir
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range decl.FindAllSubmatch(src, -1) {
			funcs = append(funcs, string(m[1]))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range named {
		if !slices.ContainsFunc(funcs, func(f string) bool { return f == m[1] || (m[2] == "*" && strings.HasPrefix(f, m[1])) }) {
			t.Errorf("README.md names %s%s, which no test file declares", m[1], m[2])
		}
	}
}

// TestREADMELayout: the layout table names every Go package of the tree,
// and every path it names exists.
func TestREADMELayout(t *testing.T) {
	repo, text := readREADME(t)
	_, prose := readmeBlocks(text)
	listed := layoutPaths(prose)
	if len(listed) == 0 {
		t.Fatal("README.md has no layout table under ## Layout")
	}
	for _, p := range listed {
		if _, err := os.Stat(filepath.Join(repo, p)); err != nil {
			t.Errorf("the layout table names %s: %v", p, err)
		}
	}
	for _, pkg := range goPackageDirs(t, repo) {
		if !slices.Contains(listed, pkg) {
			t.Errorf("the layout table does not name the package %s", pkg)
		}
	}
}

// goPackageDirs returns the repository's directories that hold Go files,
// as go list ./... sees them (no testdata, node_modules, hidden or
// underscore directories, nor build outputs).
func goPackageDirs(t *testing.T, repo string) []string {
	t.Helper()
	var dirs []string
	err := filepath.WalkDir(repo, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != repo && (name == "testdata" || name == "node_modules" || name == "bin" ||
				strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(name, ".go") {
			rel, err := filepath.Rel(repo, filepath.Dir(path))
			if err != nil {
				return err
			}
			if rel == "." {
				rel = ""
			}
			if len(dirs) == 0 || dirs[len(dirs)-1] != rel {
				dirs = append(dirs, filepath.ToSlash(rel))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) < 20 {
		t.Fatalf("found %d Go packages under %s", len(dirs), repo)
	}
	return slices.Compact(dirs)
}

// checkBlock checks an sh check block's commands without running them and
// returns how many it checked.
func checkBlock(t *testing.T, repo string, b readmeBlock) int {
	t.Helper()
	targets := makeTargets(t, repo)
	n := 0
	for _, c := range shellCommands(b) {
		for _, words := range shellSegments(c.text) {
			if err := checkCommand(repo, targets, words); err != nil {
				t.Errorf("README.md:%d: %s: %v", c.line, c.text, err)
			}
		}
		n++
	}
	return n
}

// checkCommand checks one simple command of a check block.
func checkCommand(repo string, targets map[string]bool, words []string) error {
	prog, args := program(words)
	switch {
	case prog == "make":
		for _, a := range args {
			if !strings.HasPrefix(a, "-") && !strings.Contains(a, "=") && !targets[a] {
				return fmt.Errorf("make has no target %q", a)
			}
		}
		return nil
	case prog == "bin/spool":
		return checkSpoolArgs(args)
	case strings.Contains(prog, "/"):
		fi, err := os.Stat(filepath.Join(repo, prog))
		if err != nil {
			return err
		}
		if fi.Mode()&0o111 == 0 {
			return fmt.Errorf("%s is not executable", prog)
		}
		return nil
	default:
		_, err := exec.LookPath(prog)
		return err
	}
}

// checkSpoolArgs parses a spool command line as spool would, without
// running it: the command must exist and take every flag and argument.
func checkSpoolArgs(args []string) error {
	root := newRootCmd()
	cmd, rest, err := root.Find(args)
	if err != nil {
		return err
	}
	if cmd == root {
		return fmt.Errorf("no spool command in %q", args)
	}
	if err := cmd.ParseFlags(rest); err != nil {
		return fmt.Errorf("spool %s: %w", cmd.Name(), err)
	}
	return cmd.ValidateArgs(cmd.Flags().Args())
}

// makeTargets returns the targets the Makefile and mk/*.mk define (both
// sides of their OS conditionals).
func makeTargets(t *testing.T, repo string) map[string]bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(repo, "mk", "*.mk"))
	if err != nil {
		t.Fatal(err)
	}
	rule := regexp.MustCompile(`^([A-Za-z0-9_.\-]+(?:[ \t]+[A-Za-z0-9_.\-]+)*)[ \t]*:([^=]|$)`)
	targets := map[string]bool{}
	for _, f := range append([]string{filepath.Join(repo, "Makefile")}, files...) {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(text), "\n") {
			if m := rule.FindStringSubmatch(l); m != nil {
				for _, name := range strings.Fields(m[1]) {
					targets[name] = true
				}
			}
		}
	}
	if !targets["test"] || !targets["run"] {
		t.Fatalf("found no test or run target in the Makefile (%d targets)", len(targets))
	}
	return targets
}

// noteSpoolCommands records the spool commands a block uses.
func noteSpoolCommands(b readmeBlock, used map[string]bool) {
	for _, c := range shellCommands(b) {
		for _, words := range shellSegments(c.text) {
			if prog, args := program(words); prog == "bin/spool" && len(args) > 0 {
				used[args[0]] = true
			}
		}
	}
}

// checkOutput requires every line of an output block in the stdout of
// the command before it.
func checkOutput(t *testing.T, b readmeBlock, r readmeResult) {
	t.Helper()
	got := collapseSpaces(r.stdout)
	lines := 0
	for i, l := range b.lines {
		if l = collapseSpaces(l); l == "" {
			continue
		}
		lines++
		if !strings.Contains(got, l) {
			t.Errorf("README.md:%d: %q is not in the output of %s:\n%s", b.line+1+i, l, r.cmd.text, tail(r.stdout))
		}
	}
	if lines == 0 {
		t.Errorf("README.md:%d: an empty output block", b.line)
	}
}

// checkCodexConfig requires every setting of the README's Codex config in
// the config.toml the agents suite writes for Codex.
func checkCodexConfig(t *testing.T, repo string, b readmeBlock) {
	t.Helper()
	suite := filepath.Join(repo, "engine", "server", "agents", "agents.test.js")
	js, err := os.ReadFile(suite)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)config\\.toml'\\), `(.*?)`\\);").FindSubmatch(js)
	if m == nil {
		t.Fatalf("%s writes no config.toml for Codex", suite)
	}
	tested := map[string]bool{}
	for _, l := range strings.Split(strings.ReplaceAll(string(m[1]), "${baseURL}", "http://"+readmePlaceholderAddr), "\n") {
		tested[tomlLine(l)] = true
	}
	shown := map[string]bool{}
	for i, l := range b.lines {
		if l = tomlLine(l); l == "" {
			continue
		}
		shown[l] = true
		if !tested[l] {
			t.Errorf("README.md:%d: %q is not in the Codex config of %s", b.line+1+i, l, suite)
		}
	}
	for _, must := range []string{`base_url = "http://` + readmePlaceholderAddr + `/v1"`, `wire_api = "responses"`} {
		if !shown[must] {
			t.Errorf("README.md:%d: the Codex config lacks %s", b.line, must)
		}
	}
}

// tomlLine is a TOML line without its comment and outer white space.
func tomlLine(l string) string {
	code, _ := splitComment(l)
	return collapseSpaces(code)
}
