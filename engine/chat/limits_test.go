package chat

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// testLimits are small limits so that hostile templates are refused fast.
// testLimits' time limit is out of reach: every hostile template must be
// refused by what it counts (steps, bytes, items, depth), the same on any
// machine, never by the clock.
var testLimits = Limits{MaxSteps: 2_000_000, MaxOutput: 1 << 20, MaxItems: 100_000, MaxDepth: 32, Timeout: time.Hour}

// hostileTemplates are templates that, unbounded, exhaust memory, the stack
// or a core. Each must be refused with ErrTemplateLimit.
var hostileTemplates = []struct{ name, src string }{
	{"huge range", `{% for i in range(10**12) %}x{% endfor %}`},
	{"huge int range", `{% for i in range(1000000000000) %}{% endfor %}`},
	{"self-calling macro", `{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}`},
	{"mutual recursion", `{% macro a() %}{{ b() }}{% endmacro %}{% macro b() %}{{ a() }}{% endmacro %}{{ a() }}`},
	{"caller recursion", `{% macro m() %}{% call m() %}x{% endcall %}{% endmacro %}{{ m() }}`},
	{"string repeat", `{{ 'x' * 10000000000 }}`},
	{"string repeat in a variable", `{% set n = 1000000 %}{% set s = 'abcdefgh' * n %}{{ s|length }}`},
	{"join over a huge range", `{{ range(100000000)|join(',') }}`},
	{"join with a huge separator", `{% set s = 'x' * 100000 %}{{ range(50000)|join(s) }}`},
	{"nested loops", `{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}`},
	{"nested loops over messages", `{% for a in messages %}{% for b in messages %}{% for c in messages %}{{ '' }}{% endfor %}{% endfor %}{% endfor %}`},
	{"doubling string", `{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s|length }}`},
	{"doubling list", `{% set ns = namespace(l=[1]) %}{% for i in range(64) %}{% set ns.l = ns.l + ns.l %}{% endfor %}{{ ns.l|length }}`},
	{"growing list", `{% set l = [] %}{% for i in range(100000) %}{% for j in range(100) %}{{ l.append(j) }}{% endfor %}{% endfor %}`},
	{"growing dict", `{% set d = {} %}{% for i in range(100000) %}{% for j in range(10) %}{{ d.update({(i*10+j)|string: j}) }}{% endfor %}{% endfor %}`},
	{"huge output", `{% for i in range(100000) %}{{ 'x' * 100 }}{% endfor %}`},
	{"self-containing list printed", `{% set l = [] %}{{ l.append(l) }}{{ l.append(l) }}{{ l }}`},
	{"self-containing list as JSON", `{% set l = [] %}{{ l.append(l) }}{{ l.append(l) }}{{ l|tojson }}`},
	{"self-containing namespace", `{% set ns = namespace() %}{% set ns.a = ns %}{% set ns.b = ns %}{{ ns|tojson }}`},
	{"shared string printed many times", `{% set s = 'x' * 500000 %}{% set l = [s, s, s, s, s, s, s, s] %}{{ l }}`},
	{"replace amplification", `{% set s = 'x' * 100000 %}{{ s.replace('x', 'y' * 1000) }}`},
	{"replace filter amplification", `{% set s = 'x' * 100000 %}{{ s|replace('', 'yyyyyyyyyy') }}`},
	{"format amplification", `{% set s = '{}' * 100000 %}{{ s.format('y' * 100000) }}`},
	{"indent amplification", `{% set s = '\n' * 100000 %}{{ s|indent(100000) }}`},
	{"split into runes", `{% set s = 'x' * 500000 %}{{ s.split('x')|length }}`},
	{"list of a long string", `{% set s = 'x' * 500000 %}{{ s|list|length }}`},
	{"loop over a long string", `{% set s = 'x' * 500000 %}{% for c in s %}{% endfor %}`},
	{"huge slice", `{{ messages[0:1000000000000:2]|length }}{% for i in range(10**9)[::3] %}{% endfor %}`},
}

func TestHostileTemplatesAreRefused(t *testing.T) {
	msgs := make([]Message, 200)
	for i := range msgs {
		msgs[i] = Message{Role: "user", Content: "hi"}
	}
	for _, tc := range hostileTemplates {
		t.Run(tc.name, func(t *testing.T) {
			tmpl, err := ParseTemplate(tc.src)
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			out, err := tmpl.Render(msgs, Options{Limits: testLimits})
			runtime.ReadMemStats(&after)
			if !errors.Is(err, ErrTemplateLimit) {
				t.Fatalf("want a template limit error, got %v (output %d bytes)", err, len(out))
			}
			if !strings.Contains(err.Error(), "template limit exceeded") {
				t.Errorf("error %q does not say which limit", err)
			}
			var le *LimitError
			if errors.As(err, &le) && le.Limit == "time" {
				t.Errorf("refused by %v, want a counted limit", err)
			}
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 512<<20 {
				t.Errorf("allocated %d MiB before refusing", alloc>>20)
			}
			t.Log(err)
		})
	}
}

func TestHostileTemplateDefaultLimits(t *testing.T) {
	// The defaults refuse the cases too, well before memory runs out.
	for _, src := range []string{
		`{% for i in range(10**12) %}x{% endfor %}`,
		`{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}`,
		`{{ 'x' * 10000000000 }}`,
		`{{ range(100000000)|join(',') }}`,
	} {
		tmpl, err := ParseTemplate(src)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tmpl.Render([]Message{{Role: "user", Content: "hi"}}, Options{}); !errors.Is(err, ErrTemplateLimit) {
			t.Errorf("%s: want a template limit error, got %v", src, err)
		}
	}
}

func TestHostileTemplateSourceIsRefused(t *testing.T) {
	big := strings.Repeat("x", MaxTemplateBytes+1)
	if _, err := ParseTemplate(big); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Fatalf("a template over %d bytes: got %v", MaxTemplateBytes, err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "chat_template.jinja")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(50 << 20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := LoadTemplate(dir); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Fatalf("a 50 MB chat_template.jinja: got %v", err)
	}

	for _, src := range []string{
		"{{ " + strings.Repeat("(", 100000) + "1" + strings.Repeat(")", 100000) + " }}",
		"{{ " + strings.Repeat("-", 100000) + "1 }}",
		"{{ " + strings.Repeat("not ", 100000) + "1 }}",
		strings.Repeat("{% if true %}", 10000) + strings.Repeat("{% endif %}", 10000),
	} {
		if _, err := ParseTemplate(src); !errors.Is(err, ErrTemplateLimit) {
			t.Errorf("deeply nested source %.20q: want a nesting limit error, got %v", src, err)
		}
	}
	// A long operator chain parses but nests as deep as it is long.
	chain := "{{ 'a'" + strings.Repeat(" ~ 'a'", 50000) + " }}"
	tmpl, err := ParseTemplate(chain)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tmpl.Render(nil, Options{Limits: testLimits}); !errors.Is(err, ErrTemplateLimit) {
		t.Errorf("a 50,000-long ~ chain: want a nesting limit error, got %v", err)
	}
}

func TestRenderStopsWithItsContext(t *testing.T) {
	tmpl, err := ParseTemplate(`{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}`)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	// Limits no render can reach: only the context can stop it (a render
	// that ignored it would hang the test).
	_, err = tmpl.RenderContext(ctx, nil, Options{Limits: Limits{MaxSteps: 1 << 62, Timeout: 24 * time.Hour}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("want context.Canceled, got %v", err)
	}

	_, err = tmpl.RenderContext(context.Background(), nil, Options{Limits: Limits{MaxSteps: 1 << 62, Timeout: 100 * time.Millisecond}})
	var le *LimitError
	if !errors.As(err, &le) || le.Limit != "time" {
		t.Fatalf("want a time limit error, got %v", err)
	}
}

func TestLimitsKeepOrdinaryTemplates(t *testing.T) {
	// Loops, macros, recursion a few levels deep and output well within the
	// limits render as before.
	src := `{% macro count(n) %}{% if n > 0 %}{{ n }},{{ count(n - 1) }}{% endif %}{% endmacro %}` +
		`{{ count(10) }}{% for m in messages %}[{{ m.role }}:{{ m.content }}]{% endfor %}{{ ('ab' * 3)|upper }}`
	tmpl, err := ParseTemplate(src)
	if err != nil {
		t.Fatal(err)
	}
	out, err := tmpl.Render([]Message{{Role: "user", Content: "hi"}, {Role: "assistant", Content: "yo"}}, Options{Limits: testLimits})
	if err != nil {
		t.Fatal(err)
	}
	if want := "10,9,8,7,6,5,4,3,2,1,[user:hi][assistant:yo]ABABAB"; out != want {
		t.Fatalf("got %q, want %q", out, want)
	}
}

// FuzzTemplateLimits renders arbitrary templates under small limits: no
// template may crash the process, escape the counted limits (the time limit
// is out of reach, so a render the steps do not bound hangs the fuzzer) or
// produce more than its output limit.
func FuzzTemplateLimits(f *testing.F) {
	for _, tc := range hostileTemplates {
		f.Add(tc.src)
	}
	f.Add(`{% for m in messages %}{{ m.content * 1000 }}{% endfor %}`)
	f.Add(`{% set l = [1, 2] %}{% for x in l * 3 %}{{ x ~ l }}{% endfor %}`)
	lim := Limits{MaxSteps: 200_000, MaxOutput: 64 << 10, MaxItems: 10_000, MaxDepth: 16, Timeout: time.Hour}
	msgs := []Message{{Role: "user", Content: "hello"}, {Role: "assistant", Content: "hi"}}
	f.Fuzz(func(t *testing.T, src string) {
		tmpl, err := ParseTemplate(src)
		if err != nil {
			return
		}
		out, err := tmpl.Render(msgs, Options{Limits: lim, AddGenerationPrompt: true})
		if err == nil && len(out) > lim.MaxOutput {
			t.Fatalf("output of %d bytes under a %d-byte limit", len(out), lim.MaxOutput)
		}
	})
}
