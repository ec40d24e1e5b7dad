// This file is Spool's addition to the vendored engine: the resource limits
// of one render. See README.spool.md.

package jinja

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Limits bound one render. Zero fields take the defaults of DefaultLimits.
type Limits struct {
	// MaxSteps bounds the work of a render: every node, expression and loop
	// iteration is a step, and building a string or list costs a step per
	// 16 bytes or per item.
	MaxSteps int64
	// MaxOutput bounds the bytes of the output and of any one string the
	// template builds.
	MaxOutput int
	// MaxItems bounds the length of any one list or dict the template
	// builds or iterates.
	MaxItems int
	// MaxDepth bounds nested macro and caller calls.
	MaxDepth int
	// Timeout bounds the render's wall time.
	Timeout time.Duration
}

// DefaultLimits are the limits of Render and of zero Limits fields.
var DefaultLimits = Limits{
	MaxSteps:  20_000_000,
	MaxOutput: 16 << 20,
	MaxItems:  1 << 20,
	MaxDepth:  64,
	Timeout:   5 * time.Second,
}

func (l Limits) withDefaults() Limits {
	if l.MaxSteps <= 0 {
		l.MaxSteps = DefaultLimits.MaxSteps
	}
	if l.MaxOutput <= 0 {
		l.MaxOutput = DefaultLimits.MaxOutput
	}
	if l.MaxItems <= 0 {
		l.MaxItems = DefaultLimits.MaxItems
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = DefaultLimits.MaxDepth
	}
	if l.Timeout <= 0 {
		l.Timeout = DefaultLimits.Timeout
	}
	return l
}

// ErrLimit is wrapped by every *LimitError.
var ErrLimit = errors.New("template limit exceeded")

// LimitError reports the limit a render ran into.
type LimitError struct {
	// Limit names it: "steps", "output", "string", "items", "depth",
	// "nesting" or "time".
	Limit string
	// Max is the limit's value (bytes, items, steps, levels or
	// milliseconds).
	Max int64
	// What says what exceeded it.
	What string
}

func (e *LimitError) Error() string {
	switch e.Limit {
	case "time":
		return fmt.Sprintf("template limit exceeded: rendering took longer than %d ms", e.Max)
	case "steps":
		return fmt.Sprintf("template limit exceeded: more than %d evaluation steps", e.Max)
	case "depth":
		return fmt.Sprintf("template limit exceeded: %s nested deeper than %d calls", e.What, e.Max)
	case "nesting":
		return fmt.Sprintf("template limit exceeded: %s nested deeper than %d levels", e.What, e.Max)
	case "items":
		return fmt.Sprintf("template limit exceeded: %s would hold more than %d items", e.What, e.Max)
	}
	return fmt.Sprintf("template limit exceeded: %s would be larger than %d bytes", e.What, e.Max)
}

func (e *LimitError) Unwrap() error { return ErrLimit }

// maxNesting bounds the nesting of values that are printed, compared or
// encoded, and of expressions and blocks in the source.
const maxNesting = 200

// maxEvalNesting bounds the nesting of expressions being evaluated (a
// long chain of binary operators nests as deep as it is long).
const maxEvalNesting = 2000

// checkEvery is how many steps pass between two checks of the context and
// the clock.
const checkEvery = 1 << 12

// budget is the state of one render's limits, shared by every evaluator of
// the render (macros, caller blocks, set and filter blocks).
type budget struct {
	ctx      context.Context
	lim      Limits
	deadline time.Time
	steps    int64
	next     int64 // step count of the next context check
	depth    int
	nest     int // nesting of expressions being evaluated
}

func newBudget(ctx context.Context, lim Limits) *budget {
	lim = lim.withDefaults()
	return &budget{ctx: ctx, lim: lim, deadline: time.Now().Add(lim.Timeout), next: checkEvery}
}

// tick counts n steps and checks the step limit, the context and the clock.
func (b *budget) tick(n int64) error {
	b.steps += n
	if b.steps > b.lim.MaxSteps {
		return &LimitError{Limit: "steps", Max: b.lim.MaxSteps}
	}
	if b.steps < b.next {
		return nil
	}
	b.next = b.steps + checkEvery
	if err := b.ctx.Err(); err != nil {
		return fmt.Errorf("rendering stopped: %w", context.Cause(b.ctx))
	}
	if time.Now().After(b.deadline) {
		return &LimitError{Limit: "time", Max: b.lim.Timeout.Milliseconds()}
	}
	return nil
}

// bytesCost is the step cost of building n bytes.
func bytesCost(n int) int64 { return int64(n)/16 + 1 }

// enter counts one nested macro or caller call; leave undoes it.
func (b *budget) enter(name string) error {
	if b.depth >= b.lim.MaxDepth {
		return &LimitError{Limit: "depth", Max: int64(b.lim.MaxDepth), What: "macro " + name}
	}
	b.depth++
	return nil
}

func (b *budget) leave() { b.depth-- }

// stringSize refuses a string of n bytes.
func (b *budget) stringSize(what string, n int64) error {
	if n > int64(b.lim.MaxOutput) {
		return &LimitError{Limit: "string", Max: int64(b.lim.MaxOutput), What: what}
	}
	return nil
}

// itemCount refuses a list or dict of n items.
func (b *budget) itemCount(what string, n int64) error {
	if n > int64(b.lim.MaxItems) {
		return &LimitError{Limit: "items", Max: int64(b.lim.MaxItems), What: what}
	}
	return nil
}

// built checks and charges a value the template just built.
func (b *budget) built(what string, v Value) error {
	switch v.kind {
	case KindString:
		n := len(v.AsString())
		if err := b.stringSize(what, int64(n)); err != nil {
			return err
		}
		return b.tick(bytesCost(n))
	case KindList:
		n := v.AsList().Len()
		if err := b.itemCount(what, int64(n)); err != nil {
			return err
		}
		return b.tick(int64(n) + 1)
	case KindDict:
		n := v.AsDict().Len()
		if err := b.itemCount(what, int64(n)); err != nil {
			return err
		}
		return b.tick(int64(n) + 1)
	}
	return nil
}

// printedSize is the length of printValue(v), computed only up to limit
// (the result is then more than limit). It charges the values visited.
func (b *budget) printedSize(v Value, limit int64) (int64, error) {
	var visited int64
	n := sizeOfPrint(v, limit, 0, &visited)
	return n, b.tick(visited)
}

func sizeOfPrint(v Value, limit int64, level int, visited *int64) int64 {
	*visited++
	switch v.kind {
	case KindString:
		if level == 0 {
			return int64(len(v.AsString()))
		}
		return int64(len(v.AsString())) + 2
	case KindList, KindDict:
		if level >= maxNesting {
			return 5 // "[...]"
		}
		var n int64 = 2
		if v.kind == KindList {
			for _, item := range v.AsList().Items {
				n += 2 + sizeOfPrint(item, limit-n, level+1, visited)
				if n > limit {
					return n
				}
			}
			return n
		}
		d := v.AsDict()
		for _, k := range d.Keys {
			n += 6 + int64(len(k)) + sizeOfPrint(d.Data[k], limit-n, level+1, visited)
			if n > limit {
				return n
			}
		}
		return n
	}
	return 24
}

// checkPrint refuses to print v when its text would exceed the output limit.
func (b *budget) checkPrint(what string, v Value) error {
	if v.kind != KindList && v.kind != KindDict {
		return nil
	}
	n, err := b.printedSize(v, int64(b.lim.MaxOutput))
	if err != nil {
		return err
	}
	return b.stringSize(what, n)
}

// printingFilters are the builtin filters that print their input first.
var printingFilters = map[string]bool{
	"trim": true, "lower": true, "upper": true, "title": true, "capitalize": true,
	"wordcount": true, "escape": true, "e": true, "string": true, "indent": true,
	"replace": true, "tojson": true, "join": true,
}

// precheckFilter refuses, before it runs, a builtin filter call whose result
// would exceed a limit.
func (b *budget) precheckFilter(name string, args []Value, kwargs map[string]Value) error {
	if len(args) == 0 {
		return nil
	}
	what := "the result of the " + name + " filter"
	if printingFilters[name] {
		if err := b.checkPrint(what, args[0]); err != nil {
			return err
		}
	}
	switch name {
	case "join":
		if !args[0].IsList() {
			return nil
		}
		sep := ""
		if len(args) > 1 {
			sep = printValue(args[1])
		}
		if s, ok := kwargs["d"]; ok {
			sep = printValue(s)
		}
		items := args[0].AsList().Items
		limit := int64(b.lim.MaxOutput)
		total := int64(len(sep)) * int64(max(len(items)-1, 0))
		for _, item := range items {
			if total > limit {
				break
			}
			n, err := b.printedSize(item, limit-total)
			if err != nil {
				return err
			}
			total += n
		}
		return b.stringSize(what, total)
	case "indent":
		width := int64(4)
		if len(args) > 1 {
			width = toInt64(args[1])
		}
		if w, ok := kwargs["width"]; ok {
			width = toInt64(w)
		}
		s := printValue(args[0])
		lines := int64(strings.Count(s, "\n") + 1)
		return b.stringSize(what, int64(len(s))+lines*max(width, 0))
	case "replace":
		if len(args) < 3 {
			return nil
		}
		return b.stringSize(what, replacedSize(printValue(args[0]), printValue(args[1]), printValue(args[2])))
	case "list":
		if args[0].IsString() {
			return b.itemCount(what, int64(utf8.RuneCountInString(args[0].AsString())))
		}
	case "tojson":
		if indent, ok := kwargs["indent"]; ok && toInt64(indent) > 64 {
			return &LimitError{Limit: "string", Max: 64, What: "the tojson indent"}
		}
	case "fromjson":
		if args[0].IsString() {
			// Decoded values take several times the bytes of their text.
			return b.stringSize(what, 16*int64(len(args[0].AsString())))
		}
	}
	return nil
}

// precheckCall refuses, before it runs, a builtin global call whose result
// would exceed a limit.
func (b *budget) precheckCall(name string, args []Value) error {
	if name != "range" || len(args) == 0 || len(args) > 3 {
		return nil
	}
	start, stop, step := int64(0), toInt64(args[0]), int64(1)
	if len(args) > 1 {
		start, stop = toInt64(args[0]), toInt64(args[1])
	}
	if len(args) > 2 {
		step = toInt64(args[2])
	}
	var n int64
	switch {
	case step > 0 && stop > start:
		n = (stop-start-1)/step + 1
	case step < 0 && stop < start:
		n = (start-stop-1)/(-step) + 1
	}
	if n < 0 { // overflow of stop-start
		n = int64(b.lim.MaxItems) + 1
	}
	return b.itemCount(fmt.Sprintf("range(%d, %d, %d)", start, stop, step), n)
}

// replacedSize is the length of strings.Replace(s, old, repl, -1).
func replacedSize(s, old, repl string) int64 {
	count := int64(strings.Count(s, old))
	return int64(len(s)) + count*(int64(len(repl))-int64(len(old)))
}
