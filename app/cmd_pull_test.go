package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spoolhq/spool/engine/download"
	"github.com/spoolhq/spool/engine/download/fakehub"
	"github.com/spoolhq/spool/engine/download/hfcache"
	"github.com/spoolhq/spool/engine/pull"
	"github.com/spoolhq/spool/native/sysinfo"
)

// pullEnv serves a small repository from a fake hub and points the HF
// environment at it and at an empty cache.
func pullEnv(t *testing.T) (fakehub.Repo, string) {
	t.Helper()
	repo := fakehub.SampleRepo("acme/tiny", 7, 300<<10, 5000)
	home := hubEnv(t, repo)
	return repo, filepath.Join(home, "hub")
}

// hubEnv serves repo from a fake hub and points the HF environment at it
// and at an empty cache under the home it returns.
func hubEnv(t *testing.T, repo fakehub.Repo) (home string) {
	t.Helper()
	srv := httptest.NewServer(fakehub.New(repo))
	t.Cleanup(srv.Close)
	home = t.TempDir()
	t.Setenv("HF_ENDPOINT", srv.URL)
	t.Setenv("HF_HOME", home)
	t.Setenv("HF_HUB_CACHE", filepath.Join(home, "hub"))
	t.Setenv("HF_TOKEN", "")
	t.Setenv("HF_HUB_OFFLINE", "")
	t.Setenv(pull.StoreEnv, filepath.Join(home, "store"))
	return home
}

func runPullCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRootCmd()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	err := root.Execute()
	return out.String() + errOut.String(), err
}

func TestPullDryRun(t *testing.T) {
	repo, cache := pullEnv(t)
	out, err := runPullCmd(t, "pull", repo.ID, "--dry-run")
	var ee exitError
	if err != nil && !(errors.As(err, &ee) && ee.code == exitNoSpace) {
		t.Fatalf("pull --dry-run: %v\n%s", err, out)
	}
	want := []string{
		"Repository  acme/tiny",
		"Revision    main (commit " + repo.Commit + ")",
		"Files       7 (2 LFS)",
		"To fetch",
		"Free space",
		"reserve",
		"missing",
		"model-00001-of-00002.safetensors",
		"tokenizer/tokenizer.json",
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
	if _, err := os.Stat(cache); err == nil {
		t.Errorf("--dry-run created the cache directory %s", cache)
	}
}

func TestPullDryRunJSON(t *testing.T) {
	repo, _ := pullEnv(t)
	out, err := runPullCmd(t, "pull", repo.ID, "--dry-run", "--json")
	var ee exitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("pull --dry-run --json: %v\n%s", err, out)
	}
	var plan download.Plan
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatalf("output is not a JSON plan: %v\n%s", err, out)
	}
	if plan.Commit != repo.Commit || len(plan.Files) != len(repo.Files) || plan.TotalBytes != repo.Size() {
		t.Errorf("plan %+v", plan)
	}
}

// TestPullDownloadsThenReuses: a repository that is not a model Spool
// packs (its shards' headers do not parse) is stored as it is, in the
// store, or, with --keep-original, in the Hugging Face cache; a second
// plan finds everything there.
func TestPullDownloadsThenReuses(t *testing.T) {
	if ds, err := sysinfo.DiskFree(os.TempDir()); err != nil || ds.Available < download.MinReserve+(1<<30) {
		t.Skipf("needs %d bytes free in %s for the preflight reserve", download.MinReserve, os.TempDir())
	}
	for _, keep := range []bool{false, true} {
		t.Run(fmt.Sprintf("keep original %v", keep), func(t *testing.T) {
			repo, cache := pullEnv(t)
			args := []string{"pull", repo.ID}
			if keep {
				args = append(args, "--keep-original")
			}
			out, err := runPullCmd(t, args...)
			if err != nil {
				t.Fatalf("pull: %v\n%s", err, out)
			}
			if !strings.Contains(out, "Done: 7 files") || !strings.Contains(out, "verified model-00001-of-00002.safetensors") ||
				!strings.Contains(out, "not packed") {
				t.Errorf("output:\n%s", out)
			}
			dir := pull.ModelDir(os.Getenv(pull.StoreEnv), repo.ID, repo.Commit)
			c := hfcache.New(cache, repo.ID)
			for _, f := range repo.Files {
				for _, path := range []string{filepath.Join(dir, f.Path), c.SnapshotPath(repo.Commit, f.Path)} {
					b, err := os.ReadFile(path)
					if (err != nil || !bytes.Equal(b, f.Data)) && (keep || strings.HasPrefix(path, dir)) {
						t.Errorf("%s: %v", path, err)
					}
				}
			}
			out, err = runPullCmd(t, append(args, "--dry-run")...)
			if err != nil || !strings.Contains(out, "To fetch    0 bytes") || strings.Contains(out, "missing") {
				t.Errorf("second dry run: %v\n%s", err, out)
			}
		})
	}
}

func TestPullRefusesOffline(t *testing.T) {
	pullEnv(t)
	t.Setenv("HF_HUB_OFFLINE", "1")
	if _, err := runPullCmd(t, "pull", "--dry-run"); err == nil || !strings.Contains(err.Error(), "HF_HUB_OFFLINE") {
		t.Errorf("pull with HF_HUB_OFFLINE: %v", err)
	}
}

func TestPullMissingRepo(t *testing.T) {
	pullEnv(t)
	_, err := runPullCmd(t, "pull", "acme/absent", "--dry-run")
	if err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("pull of a missing repo: %v", err)
	}
}

func TestPullDefaultTarget(t *testing.T) {
	repo := fakehub.SampleRepo(download.DefaultRepo, 8, 4096)
	repo.Commit = download.DefaultRevision
	repo.Branches = nil
	hubEnv(t, repo)
	out, err := runPullCmd(t, "pull", "--dry-run")
	var ee exitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("pull --dry-run: %v\n%s", err, out)
	}
	for _, w := range []string{"Repository  " + download.DefaultRepo, "Revision    " + download.DefaultRevision + "\n"} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
}

func TestPullRefusesARevisionOutsideTheCache(t *testing.T) {
	repo, cache := pullEnv(t)
	evil := filepath.Join(t.TempDir(), "evil_ref")
	rel, err := filepath.Rel(filepath.Join(cache, hfcache.Folder(repo.ID), "refs"), evil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := runPullCmd(t, "pull", repo.ID, "--revision", rel)
	if err == nil || !strings.Contains(out+err.Error(), "revision") {
		t.Fatalf("pull --revision %s: %v\n%s", rel, err, out)
	}
	if _, err := os.Stat(evil); err == nil {
		t.Fatal("pull wrote a file outside the cache")
	}
}
