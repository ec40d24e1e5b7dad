package packaging

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func read(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// one returns the single submatch of re in text, failing unless there is
// exactly one match.
func one(t *testing.T, what, text string, re *regexp.Regexp) string {
	t.Helper()
	m := re.FindAllStringSubmatch(text, -1)
	if len(m) != 1 {
		t.Fatalf("%s: %d matches of %s, want 1", what, len(m), re)
	}
	return m[0][1]
}

// TestDMGNamesAgree: make dmg, the build job's artifact, the release job's
// upload and the cask's url all name Spool-<version>-arm64.dmg, the
// version being the tag without its v.
func TestDMGNamesAgree(t *testing.T) {
	mk, wf, cask := read(t, "mk/mac.mk"), read(t, ".github/workflows/macos.yml"), read(t, "packaging/spool.rb")
	names := map[string]string{
		"mk/mac.mk DMG":          one(t, "mk/mac.mk", mk, regexp.MustCompile(`(?m)^DMG\s*:=\s*bin/(\S+)$`)),
		"macos.yml build job":    one(t, "macos.yml", wf, regexp.MustCompile(`echo "dmg=(\S+)" >> "\$GITHUB_OUTPUT"`)),
		"macos.yml release job":  one(t, "macos.yml", wf, regexp.MustCompile(`dmg="bin/(\S+)"`)),
		"packaging/spool.rb url": one(t, "spool.rb", cask, regexp.MustCompile(`(?m)^\s*url "https://github\.com/[^"]+/releases/download/v#\{version\}/([^"]+)"`)),
	}
	version := regexp.MustCompile(`\$\(DMG_VERSION\)|\$\{version#v\}|\$\{version\}|#\{version\}`)
	want := "Spool-{version}-arm64.dmg"
	for where, n := range names {
		if got := version.ReplaceAllString(n, "{version}"); got != want {
			t.Errorf("%s names %q, want %q", where, got, want)
		}
	}
	// The version is the tag's without the v, everywhere.
	if !strings.Contains(mk, "DMG_VERSION := $(patsubst v%,%,$(VERSION))") {
		t.Error("mk/mac.mk: DMG_VERSION is not VERSION without its v")
	}
	if !strings.Contains(wf, `version=${GITHUB_REF_NAME#v}`) || !strings.Contains(wf, `tags: ["v*"]`) {
		t.Error("macos.yml: the release job does not take the version from a v* tag")
	}
}

// TestMacJobRunsTheREADMECommands: the macOS build job's make steps are
// the README's "On a Mac" commands, in order.
func TestMacJobRunsTheREADMECommands(t *testing.T) {
	readme, wf := read(t, "README.md"), read(t, ".github/workflows/macos.yml")
	_, section, ok := strings.Cut(readme, "\n## On a Mac\n")
	if !ok {
		t.Fatal(`README.md has no "## On a Mac" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	_, block, ok := strings.Cut(section, "```sh check\n")
	if !ok {
		t.Fatal(`README.md's "On a Mac" section has no sh check block`)
	}
	block, _, _ = strings.Cut(block, "```")
	var readmeCmds []string
	for _, l := range strings.Split(block, "\n") {
		l, _, _ = strings.Cut(l, "#")
		if l = strings.TrimSpace(l); l != "" {
			readmeCmds = append(readmeCmds, l)
		}
	}
	build, _, _ := strings.Cut(wf, "\n  release:")
	var jobCmds []string
	for _, m := range regexp.MustCompile(`(?m)^\s+- run: (make .*)$`).FindAllStringSubmatch(build, -1) {
		jobCmds = append(jobCmds, strings.TrimSpace(m[1]))
	}
	if len(readmeCmds) < 8 || !slices.Equal(readmeCmds, jobCmds) {
		t.Fatalf("README's Mac commands %q, the macOS job's %q", readmeCmds, jobCmds)
	}
}

// TestRecipeFilesExist: the files the Mac recipes and workflows name are
// in the tree, scripts executable, and the bundle's identity is the
// cask's.
func TestRecipeFilesExist(t *testing.T) {
	mk := read(t, "mk/mac.mk")
	scripts := strings.Fields(one(t, "mk/mac.mk", mk, regexp.MustCompile(`(?m)^MAC_SCRIPTS\s*:=\s*(.+)$`)))
	execs := append(scripts, ".ci/run", "scripts/compile-shaders.sh")
	for _, f := range execs {
		fi, err := os.Stat(filepath.Join("..", f))
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		if fi.Mode()&0o111 == 0 {
			t.Errorf("%s is not executable", f)
		}
	}
	for _, f := range []string{"app/darwin/Info.plist", "app/icons/appicon.png", "assets/atlas/glm52-demo.experts.json", "assets/models/glm52-demo/config.json"} {
		if _, err := os.Stat(filepath.Join("..", f)); err != nil {
			t.Errorf("a Mac recipe needs %v", err)
		}
	}
	for _, s := range scripts {
		if !strings.Contains(mk, s) {
			t.Errorf("mk/mac.mk lists %s but no recipe runs it", s)
		}
	}
	plist, cask := read(t, "app/darwin/Info.plist"), read(t, "packaging/spool.rb")
	id := one(t, "Info.plist", plist, regexp.MustCompile(`<key>CFBundleIdentifier</key><string>([^<]+)</string>`))
	exe := one(t, "Info.plist", plist, regexp.MustCompile(`<key>CFBundleExecutable</key><string>([^<]+)</string>`))
	if q := one(t, "spool.rb", cask, regexp.MustCompile(`(?m)^\s*uninstall quit: "([^"]+)"`)); q != id {
		t.Errorf("the cask quits %q, the bundle is %q", q, id)
	}
	if b := one(t, "spool.rb", cask, regexp.MustCompile(`(?m)^\s*binary "#\{appdir\}/Spool\.app/Contents/MacOS/([^"]+)"`)); b != exe {
		t.Errorf("the cask links %q, the bundle's executable is %q", b, exe)
	}
	if !strings.Contains(read(t, ".github/workflows/linux.yml"), "run: .ci/run") {
		t.Error("linux.yml does not run .ci/run")
	}
}
