package ssecheck

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"slices"
)

// Event is one dispatched event.
type Event struct {
	// Name is the event's type ("" for the default, "message").
	Name string
	// Data is its data lines joined by newlines; HasData says whether any
	// data line was given.
	Data    string
	HasData bool
	// Line is the 1-based line of the blank line that dispatched it.
	Line int
}

// maxLine bounds one line of a stream read here.
const maxLine = 16 << 20

// Spec reads r as a conforming client does and returns the events it
// dispatches.
func Spec(r io.Reader) ([]Event, error) { return read(r, false) }

// EveryBlank reads r as a client that dispatches an event on every blank
// line, with or without data.
func EveryBlank(r io.Reader) ([]Event, error) { return read(r, true) }

// Check reads stream both ways and returns its events, or an error naming
// the first event that a client of either kind would read differently
// (most often a blank line that dispatches no data).
func Check(stream []byte) ([]Event, error) {
	spec, err := Spec(bytes.NewReader(stream))
	if err != nil {
		return nil, err
	}
	every, err := EveryBlank(bytes.NewReader(stream))
	if err != nil {
		return nil, err
	}
	for _, ev := range every {
		if !ev.HasData {
			return nil, fmt.Errorf("ssecheck: the blank line at line %d ends an event with no data: a client that dispatches every blank line reads an empty event there", ev.Line)
		}
	}
	if !slices.Equal(spec, every) {
		return nil, fmt.Errorf("ssecheck: strict and blank-line clients read different events (%d and %d)", len(spec), len(every))
	}
	return spec, nil
}

// read interprets the stream; every dispatches on every blank line.
func read(r io.Reader, every bool) ([]Event, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	sc.Split(scanLines)
	var out []Event
	var name string
	var data bytes.Buffer
	has := false
	line := 0
	for sc.Scan() {
		line++
		text := sc.Bytes()
		if line == 1 {
			text = bytes.TrimPrefix(text, []byte("\xEF\xBB\xBF"))
		}
		if len(text) == 0 {
			if has || every {
				out = append(out, Event{Name: name, Data: data.String(), HasData: has, Line: line})
			}
			name, has = "", false
			data.Reset()
			continue
		}
		if text[0] == ':' {
			continue
		}
		field, value, found := bytes.Cut(text, []byte(":"))
		if found {
			value = bytes.TrimPrefix(value, []byte(" "))
		}
		switch string(field) {
		case "event":
			name = string(value)
		case "data":
			if has {
				data.WriteByte('\n')
			}
			data.Write(value)
			has = true
		}
	}
	return out, sc.Err()
}

// scanLines splits at LF, CRLF or a lone CR, as the event-stream format
// does; a last line without its end is dropped (an event not completed
// is never dispatched).
func scanLines(data []byte, atEOF bool) (advance int, token []byte, err error) {
	for i, c := range data {
		switch c {
		case '\n':
			return i + 1, data[:i], nil
		case '\r':
			if i+1 < len(data) {
				if data[i+1] == '\n' {
					return i + 2, data[:i], nil
				}
				return i + 1, data[:i], nil
			}
			if atEOF {
				return i + 1, data[:i], nil
			}
			return 0, nil, nil // a CRLF may be split across reads
		}
	}
	if atEOF {
		return len(data), nil, nil
	}
	return 0, nil, nil
}
