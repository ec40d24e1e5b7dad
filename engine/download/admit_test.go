package download

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/spoolhq/spool/engine/download/hub"
)

// TestAdmit: a blob Admit refuses is not asked for until Admit agrees
// after a Wake; the others download meanwhile, and the job completes.
func TestAdmit(t *testing.T) {
	repo := testRepo(7)
	h, url := startHub(t, repo)
	var mu sync.Mutex
	held := map[string]bool{}
	for _, f := range repo.Files {
		if strings.HasSuffix(f.Path, ".safetensors") && !strings.Contains(f.Path, "00001") {
			held[f.Path] = true
		}
	}
	asked := 0
	o := testOptions(url, t.TempDir(), nil)
	o.Admit = func(f hub.File) bool {
		mu.Lock()
		defer mu.Unlock()
		asked++
		return !held[f.Path]
	}
	others := make(chan struct{})
	var once sync.Once
	var j *Job
	o.OnEvent = func(e Event) {
		if e.Kind != EventFileDone {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if e.Progress.FilesDone == len(repo.Files)-len(held) {
			once.Do(func() { close(others) })
		}
	}
	j = newTestJob(t, o)
	errc := make(chan error, 1)
	go func() { errc <- j.Run(context.Background()) }()
	<-others
	for path := range held {
		for etag, s := range h.Served() {
			for _, r := range s.Requests {
				if r.Path == path {
					t.Fatalf("%s (%s) was fetched while held", path, etag)
				}
			}
		}
	}
	mu.Lock()
	clear(held)
	mu.Unlock()
	j.Wake()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if asked == 0 {
		t.Fatal("Admit was never asked")
	}
}

// TestNeed: the preflight checks what Need says the download takes on the
// volume, and says why.
func TestNeed(t *testing.T) {
	repo := testRepo(8)
	_, url := startHub(t, repo)
	o := testOptions(url, t.TempDir(), nil)
	o.Reserve = 1000
	o.Need = func(p *Plan) (int64, string) { return p.ToFetch / 2, "packed as it arrives" }
	plan, err := newTestJob(t, o).Plan(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	pf := plan.Preflight
	if pf.Stored != plan.ToFetch/2 || pf.Required != pf.Stored+1000 || !strings.Contains(pf.Message, "packed as it arrives") {
		t.Fatalf("preflight %+v for %d bytes to fetch", pf, plan.ToFetch)
	}
}
