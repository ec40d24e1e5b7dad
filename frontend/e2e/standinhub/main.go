package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/spoolhq/spool/engine/download"
	"github.com/spoolhq/spool/engine/download/fakehub"
)

// The real artifact's listing (../shared/fixtures/glm52-real/README.md).
const (
	realFiles = 150
	realBytes = 383_760_077_466
)

var realMTPShards = []int64{3_527_131_672, 5_366_238_584, 1_065_950_496}

func main() {
	model := flag.String("model", "", "model directory whose files the repository holds")
	rate := flag.Int64("rate", 8<<20, "bytes per second per content answer")
	flag.Parse()
	if *model == "" {
		log.Fatal("standinhub: -model is required")
	}
	repo, err := repoOf(*model)
	if err != nil {
		log.Fatal(err)
	}
	hub := fakehub.New(repo)
	hub.SetRate(*rate)
	var real atomic.Bool
	var pad atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("POST /_standin/mode", func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Query().Get("listing") {
		case "real":
			n, _ := strconv.ParseInt(r.URL.Query().Get("pad"), 10, 64)
			pad.Store(max(0, n))
			real.Store(true)
		case "content":
			real.Store(false)
		default:
			http.Error(w, "listing must be real or content", http.StatusBadRequest)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	revision := "/api/models/" + download.DefaultRepo + "/revision/"
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if real.Load() && strings.HasPrefix(r.URL.Path, revision) {
			serveRealListing(w, pad.Load())
			return
		}
		hub.ServeHTTP(w, r)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("listening http://%s\n", ln.Addr())
	log.Fatal(http.Serve(ln, mux))
}

// repoOf is the pinned repository holding the files of dir.
func repoOf(dir string) (fakehub.Repo, error) {
	r := fakehub.Repo{ID: download.DefaultRepo, Commit: download.DefaultRevision, Branches: []string{"main"}}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return r, err
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return r, err
		}
		r.Files = append(r.Files, fakehub.File{Path: e.Name(), Data: data, LFS: strings.HasSuffix(e.Name(), ".safetensors")})
	}
	sort.Slice(r.Files, func(i, j int) bool { return r.Files[i].Path < r.Files[j].Path })
	return r, nil
}

// serveRealListing answers the revision API with the real artifact's file
// list: 141 main shards, 3 MTP shards and 6 small files.
func serveRealListing(w http.ResponseWriter, pad int64) {
	type lfs struct {
		SHA256      string `json:"sha256"`
		Size        int64  `json:"size"`
		PointerSize int64  `json:"pointerSize"`
	}
	type sibling struct {
		RFilename string `json:"rfilename"`
		Size      int64  `json:"size"`
		BlobID    string `json:"blobId"`
		LFS       *lfs   `json:"lfs,omitempty"`
	}
	small := map[string]int64{"config.json": 1883, "generation_config.json": 160, "tokenizer.json": 19_970_000, "tokenizer_config.json": 7100, "chat_template.jinja": 4200, "README.md": 5100}
	var sibs []sibling
	var total int64
	add := func(name string, size int64, big bool) {
		sum := sha256.Sum256([]byte(name))
		s := sibling{RFilename: name, Size: size, BlobID: hex.EncodeToString(sum[:20])}
		if big {
			s.LFS = &lfs{SHA256: hex.EncodeToString(sum[:]), Size: size, PointerSize: 134}
		}
		sibs = append(sibs, s)
		total += size
	}
	for name, size := range small {
		add(name, size, name == "tokenizer.json")
	}
	for i, size := range realMTPShards {
		add(fmt.Sprintf("out-mtp-%05d.safetensors", i), size, true)
	}
	const main = 141
	rest := realBytes - total
	for i := range main {
		size := rest / main
		if i == main-1 {
			size = rest - size*(main-1)
		}
		add(fmt.Sprintf("out-%05d.safetensors", i), size, true)
	}
	if len(sibs) != realFiles || total != realBytes {
		panic(fmt.Sprintf("standinhub: %d files of %d bytes, want %d of %d", len(sibs), total, realFiles, realBytes))
	}
	if pad > 0 {
		add("padding.safetensors", pad, true)
	}
	sort.Slice(sibs, func(i, j int) bool { return sibs[i].RFilename < sibs[j].RFilename })
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"id": download.DefaultRepo, "sha": download.DefaultRevision, "siblings": sibs})
}
