package main

import (
	"regexp"
	"strings"
)

// This file reads README.md for readme_test.go: its fenced blocks, the
// commands in them (a small shell lexer: quotes, $(...), continuations,
// comments, pipelines), and its layout table.

// readmeBlock is a fenced block of README.md.
type readmeBlock struct {
	info  string // the fence's info string: "sh", "sh check", "output", "toml codex"
	line  int    // the README line of the opening fence
	lines []string
}

// readmeBlocks returns the fenced blocks of a Markdown text, and the text
// outside them (prose, tables) with fenced lines blanked.
func readmeBlocks(text string) (blocks []readmeBlock, prose string) {
	var out []string
	var cur *readmeBlock
	for i, l := range strings.Split(text, "\n") {
		switch {
		case cur == nil && strings.HasPrefix(l, "```"):
			cur = &readmeBlock{info: strings.Join(strings.Fields(strings.TrimPrefix(l, "```")), " "), line: i + 1}
			out = append(out, "")
		case cur != nil && strings.TrimSpace(l) == "```":
			blocks = append(blocks, *cur)
			cur = nil
			out = append(out, "")
		case cur != nil:
			cur.lines = append(cur.lines, l)
			out = append(out, "")
		default:
			out = append(out, l)
		}
	}
	if cur != nil {
		blocks = append(blocks, readmeBlock{info: "unclosed " + cur.info, line: cur.line})
	}
	return blocks, strings.Join(out, "\n")
}

// shellCommand is one command line of a shell block: backslash
// continuations joined, the trailing comment split off.
type shellCommand struct {
	text    string
	comment string
	line    int
}

// shellCommands returns the commands of a block; comment-only and blank
// lines are not commands.
func shellCommands(b readmeBlock) []shellCommand {
	var cmds []shellCommand
	var pending string
	start := 0
	for i, l := range b.lines {
		if pending == "" {
			start = b.line + 1 + i
		}
		if strings.HasSuffix(l, "\\") {
			pending += strings.TrimSuffix(l, "\\") + " "
			continue
		}
		text, comment := splitComment(pending + l)
		pending = ""
		if text = strings.TrimSpace(text); text != "" {
			cmds = append(cmds, shellCommand{text: text, comment: comment, line: start})
		}
	}
	return cmds
}

// splitComment splits a shell line at its first unquoted '#' that starts
// a word.
func splitComment(s string) (code, comment string) {
	var quote rune
	for i, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		case r == '#' && (i == 0 || s[i-1] == ' ' || s[i-1] == '\t'):
			return s[:i], strings.TrimSpace(s[i+1:])
		}
	}
	return s, ""
}

// shellSegments splits a command into its simple commands (at unquoted
// |, ||, &&, ; and &) and each into words, with quotes removed and
// nothing expanded: "$(seq 1 3)" stays one word.
func shellSegments(s string) [][]string {
	var segs [][]string
	var words []string
	var word strings.Builder
	inWord := false
	endWord := func() {
		if inWord {
			words = append(words, word.String())
			word.Reset()
			inWord = false
		}
	}
	endSeg := func() {
		endWord()
		if len(words) > 0 {
			segs = append(segs, words)
		}
		words = nil
	}
	var quote rune
	depth := 0 // unquoted $( nesting
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				word.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == '$' && i+1 < len(rs) && rs[i+1] == '(':
			depth++
			word.WriteString("$(")
			inWord = true
			i++
		case r == ')' && depth > 0:
			depth--
			word.WriteRune(r)
		case depth > 0:
			word.WriteRune(r)
		case r == ' ' || r == '\t':
			endWord()
		case r == '|' || r == '&' || r == ';':
			endSeg()
			if i+1 < len(rs) && (rs[i+1] == '|' || rs[i+1] == '&') {
				i++
			}
		default:
			word.WriteRune(r)
			inWord = true
		}
	}
	endSeg()
	return segs
}

// assignment matches a leading VAR=value word of a simple command.
var assignment = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

// program returns a simple command's program and arguments, after any
// leading variable assignments.
func program(words []string) (string, []string) {
	for len(words) > 0 && assignment.MatchString(words[0]) {
		words = words[1:]
	}
	if len(words) == 0 {
		return "", nil
	}
	return words[0], words[1:]
}

// layoutPaths returns the first-column paths of the table under the
// README's "## Layout" heading.
func layoutPaths(prose string) []string {
	var paths []string
	in := false
	cell := regexp.MustCompile("^\\| `([^`]+)` \\|")
	for _, l := range strings.Split(prose, "\n") {
		if strings.HasPrefix(l, "## ") {
			in = l == "## Layout"
			continue
		}
		if m := cell.FindStringSubmatch(l); in && m != nil {
			paths = append(paths, strings.TrimSuffix(m[1], "/"))
		}
	}
	return paths
}

// inlineFlags returns the --flags named in the prose's code spans.
func inlineFlags(prose string) []string {
	var flags []string
	span := regexp.MustCompile("`[^`\n]+`")
	flag := regexp.MustCompile(`(?:^|[\s(\[])--([a-z][a-z0-9-]*)`)
	for _, s := range span.FindAllString(prose, -1) {
		for _, m := range flag.FindAllStringSubmatch(strings.Trim(s, "`"), -1) {
			flags = append(flags, m[1])
		}
	}
	return flags
}

// collapseSpaces turns every run of white space into one space.
func collapseSpaces(s string) string { return strings.Join(strings.Fields(s), " ") }
