package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spoolhq/spool/internal/fixtures"
)

// serveProcess is a `spool serve` process.
type serveProcess struct {
	cmd    *exec.Cmd
	url    string
	mu     sync.Mutex
	stderr bytes.Buffer
	done   chan error
}

var servingLine = regexp.MustCompile(`serving .* on (http://\S+) `)

// startServe starts `spool serve` with args and waits until it listens.
func startServe(t *testing.T, env []string, args ...string) *serveProcess {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := &serveProcess{cmd: exec.Command(exe, append([]string{"serve", "--port", "0"}, args...)...), done: make(chan error, 1)}
	p.cmd.Env = append(os.Environ(), append(env, runMainEnv+"=1")...)
	pipe, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	listening := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.stderr.WriteString(line + "\n")
			p.mu.Unlock()
			if m := servingLine.FindStringSubmatch(line); m != nil {
				listening <- m[1]
			}
		}
		p.done <- p.cmd.Wait()
	}()
	select {
	case p.url = <-listening:
	case err := <-p.done:
		t.Fatalf("spool serve exited (%v):\n%s", err, p.log())
	case <-time.After(2 * time.Minute):
		p.cmd.Process.Kill()
		t.Fatalf("spool serve did not start:\n%s", p.log())
	}
	t.Cleanup(func() { p.cmd.Process.Kill() })
	return p
}

func (p *serveProcess) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

// stop interrupts the process, as Ctrl-C does, and waits for it to exit.
func (p *serveProcess) stop(t *testing.T) {
	t.Helper()
	p.cmd.Process.Signal(os.Interrupt)
	select {
	case err := <-p.done:
		if err != nil {
			t.Fatalf("spool serve exited with %v:\n%s", err, p.log())
		}
	case <-time.After(time.Minute):
		p.cmd.Process.Kill()
		t.Fatalf("spool serve did not stop:\n%s", p.log())
	}
}

// chat posts a chat completion and returns the reply and the usage.
func (p *serveProcess) chat(t *testing.T, messages []map[string]string) (string, map[string]any) {
	t.Helper()
	raw, _ := json.Marshal(map[string]any{"messages": messages, "max_tokens": 12, "temperature": 0})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", p.url+"/v1/chat/completions", bytes.NewReader(raw))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var out struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
		Usage map[string]any `json:"usage"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(body, &out) != nil || len(out.Choices) != 1 {
		t.Fatalf("chat: %d %s\n%s", resp.StatusCode, body, p.log())
	}
	return out.Choices[0].Message.Content, out.Usage
}

func usageInt(u map[string]any, keys ...string) int {
	var v any = u
	for _, k := range keys {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	f, _ := v.(float64)
	return int(f)
}

// TestServeRestartKeepsPromptCache: spool serve answers a 3,000-token
// prompt, is stopped and started again, and the same conversation with one
// more user turn reports at least 3,000 cached tokens (its prefill a
// fraction of the first one's; `spool bench prompt-cache` measures the
// ratio). Then three of the cached blocks are damaged (one truncated, one
// with flipped bytes, one carrying another model's identity): each is
// ignored with a log line and deleted, and the answers after later restarts
// stay those of the undamaged cache.
func TestServeRestartKeepsPromptCache(t *testing.T) {
	model := fixtures.Path(t, "glm52-mini")
	dir := t.TempDir()
	env := []string{"XDG_CACHE_HOME=" + t.TempDir()}
	args := []string{"--model", model, "--context", "8192", "--max-batch", "2", "--prompt-cache", dir}
	var rules strings.Builder
	for i := range 104 {
		fmt.Fprintf(&rules, "Rule %d: os.path.join(%q, %q) joins the two parts with the separator. ", i, fmt.Sprint("dir", i), fmt.Sprint("file", i*7))
	}
	history := []map[string]string{{"role": "system", "content": rules.String()}, {"role": "user", "content": "What does the function os.path.join do?"}}

	p := startServe(t, env, args...)
	reply, u := p.chat(t, history)
	p.stop(t)
	first, coldMS := usageInt(u, "prompt_tokens"), u["prefill_ms"]
	if first < 3000 {
		t.Fatalf("the first prompt has %d tokens, want at least 3000", first)
	}
	history = append(history, map[string]string{"role": "assistant", "content": reply}, map[string]string{"role": "user", "content": "And what does os.path.split do?"})

	p = startServe(t, env, args...)
	want, u := p.chat(t, history)
	stats := stats(t, p.url)
	p.stop(t)
	if usageInt(stats, "prompt_cache", "hits") != 1 || usageInt(stats, "prompt_cache", "disk", "hit_tokens") < 3000 || usageInt(stats, "prompt_cache", "disk", "blocks") == 0 {
		t.Errorf("/stats after the restart: %v", stats["prompt_cache"])
	}
	if c := usageInt(u, "prompt_tokens_details", "cached_tokens"); c < 3000 {
		t.Fatalf("after the restart: %d cached tokens of %d, want at least 3000 (usage %v)", c, usageInt(u, "prompt_tokens"), u)
	}
	t.Logf("first prompt: %d tokens, prefill %.0f ms; after the restart: %d of %d cached, prefill %.0f ms",
		first, coldMS, usageInt(u, "prompt_tokens_details", "cached_tokens"), usageInt(u, "prompt_tokens"), u["prefill_ms"])

	// Damage three consecutive blocks of the system prompt, in chain order:
	// flipped bytes, another model's identity, truncated.
	files := blockFilesByStart(t, dir)
	at := (first/16 - 8) * 16
	for i, spoil := range []func([]byte) []byte{flipBytes, foreignIdentity, truncate} {
		path, ok := files[at+16*i]
		if !ok {
			t.Fatalf("no block file starts at token %d", at+16*i)
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, spoil(raw), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var logs string
	// The first start deletes the truncated file; its request stops
	// restoring at the flipped one, the next start's at the foreign one
	// (the first request stored its block again), the third restores all.
	for i, cached := range []int{at, at + 16, 3000} {
		p = startServe(t, env, args...)
		got, u := p.chat(t, history)
		p.stop(t)
		logs += p.log()
		c := usageInt(u, "prompt_tokens_details", "cached_tokens")
		if got != want || (i < 2 && c != cached) || c < cached {
			t.Errorf("start %d after the damage: %q with %d cached tokens, want %q with %d", i+1, got, c, want, cached)
		}
	}
	if n := strings.Count(logs, "ignored and deleted an invalid block file"); n != 3 {
		t.Errorf("%d log lines about invalid block files, want 3:\n%s", n, logs)
	}
}

// blockFilesByStart maps the first token position of every block file in
// the cache directory dir to its path.
func blockFilesByStart(t *testing.T, dir string) map[int]string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*", "*.blk"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no block files in %s (%v)", dir, err)
	}
	out := map[int]string{}
	for _, path := range paths {
		raw, err := os.ReadFile(path)
		if err != nil || len(raw) < blockStartOffset+4 {
			t.Fatalf("%s: %v", path, err)
		}
		out[int(binary.LittleEndian.Uint32(raw[blockStartOffset:]))] = path
	}
	return out
}

// Offsets in a block file (engine/promptcache's format): magic, version,
// flags, then the identity digest, the block's hash, its parent's, and the
// block's first position.
const (
	blockIdentityOffset = 16
	blockStartOffset    = 16 + 3*32
)

func flipBytes(raw []byte) []byte {
	raw[len(raw)/2] ^= 0x40
	return raw
}

func truncate(raw []byte) []byte { return raw[:len(raw)-100] }

// foreignIdentity gives a block file another model's identity, with a
// checksum that matches.
func foreignIdentity(raw []byte) []byte {
	other := sha256.Sum256([]byte("another model"))
	copy(raw[blockIdentityOffset:], other[:])
	n := len(raw) - 4
	binary.LittleEndian.PutUint32(raw[n:], crc32.Checksum(raw[:n], crc32.MakeTable(crc32.Castagnoli)))
	return raw
}
