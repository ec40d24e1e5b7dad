package remote

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
)

// MaxEvent bounds one server-sent event (a tool call's arguments may come
// in one event).
const MaxEvent = 16 << 20

// Event is one server-sent event as the remote wrote it.
type Event struct {
	// Name is the event's "event:" field ("" for a data-only event).
	Name string
	// Data is the event's "data:" lines joined by newlines.
	Data []byte
	// Raw is the event's bytes up to and including the blank line that
	// ends it, for passing it on unchanged.
	Raw []byte
}

// Done reports whether the event is the OpenAI end marker "data: [DONE]".
func (e Event) Done() bool { return bytes.Equal(bytes.TrimSpace(e.Data), []byte("[DONE]")) }

// ErrTruncated is a stream that ended inside an event.
var ErrTruncated = errors.New("remote: the event stream ended inside an event")

// EventReader reads server-sent events.
type EventReader struct {
	r *bufio.Reader
}

// NewEventReader reads events from r.
func NewEventReader(r io.Reader) *EventReader { return &EventReader{r: bufio.NewReaderSize(r, 64<<10)} }

// Next returns the next event. It returns io.EOF when the stream ends
// between events, and ErrTruncated when it ends inside a line. A last
// event whose lines are complete but which lacks its blank line is
// returned as complete.
func (er *EventReader) Next() (Event, error) {
	var ev Event
	var raw []byte
	for {
		line, err := er.line(len(raw))
		if len(line) > 0 {
			text := bytes.TrimRight(line, "\r\n")
			if len(text) == 0 {
				if len(raw) == 0 {
					continue // blank lines between events
				}
				ev.Raw = append(raw, line...)
				return ev, nil
			}
			raw = append(raw, line...)
			er.field(&ev, text)
		}
		switch {
		case err == io.EOF && len(raw) == 0:
			return Event{}, io.EOF
		case err == io.EOF && raw[len(raw)-1] == '\n':
			ev.Raw = append(raw, '\n')
			return ev, nil
		case err == io.EOF:
			return Event{}, ErrTruncated
		case err != nil:
			return Event{}, err
		}
	}
}

// line reads one line with its newline (none at the end of the stream),
// refusing an event past MaxEvent bytes (have bytes already read).
func (er *EventReader) line(have int) ([]byte, error) {
	var out []byte
	for {
		part, err := er.r.ReadSlice('\n')
		if have+len(out)+len(part) > MaxEvent {
			return nil, fmt.Errorf("remote: an event of the stream is longer than %d bytes", MaxEvent)
		}
		out = append(out, part...)
		if err != bufio.ErrBufferFull {
			return out, err
		}
	}
}

// field applies one line of an event.
func (er *EventReader) field(ev *Event, line []byte) {
	if line[0] == ':' {
		return
	}
	name, value, _ := bytes.Cut(line, []byte(":"))
	value = bytes.TrimPrefix(value, []byte(" "))
	switch string(name) {
	case "event":
		ev.Name = string(value)
	case "data":
		if ev.Data == nil {
			ev.Data = append([]byte{}, value...)
		} else {
			ev.Data = append(append(ev.Data, '\n'), value...)
		}
	}
}

// Stream reads an event-stream answer on a goroutine of its own, so that
// its reader can wait for the next event, a keep-alive tick and its own
// client at once. The remote's silence past the client's Timeout ends it
// with a KindTimeout *Error.
type Stream struct {
	events chan Event
	stop   chan struct{}
	done   chan struct{}
	body   io.Closer
	once   sync.Once
	err    error
}

// Stream starts reading resp's events; Close ends it.
func (c *Client) Stream(resp *http.Response) *Stream {
	s := &Stream{events: make(chan Event), stop: make(chan struct{}), done: make(chan struct{}), body: resp.Body}
	go s.read(NewEventReader(resp.Body), c)
	return s
}

func (s *Stream) read(er *EventReader, c *Client) {
	defer close(s.done)
	defer close(s.events)
	for {
		ev, err := er.Next()
		if err != nil {
			if err != io.EOF {
				s.err = err
			}
			return
		}
		select {
		case s.events <- c.scrubEvent(ev):
		case <-s.stop:
			return
		}
	}
}

// Events delivers the events in order; it is closed at the end of the
// stream or after Close.
func (s *Stream) Events() <-chan Event { return s.events }

// Err is why the stream ended, once Events is closed: nil when the remote
// closed it between events (whether that was its end is the protocol's
// to say: [DONE], response.completed), ErrTruncated, a
// KindTimeout or KindUnreachable *Error, or the reader's error.
func (s *Stream) Err() error {
	select {
	case <-s.done:
		return s.err
	default:
		return nil
	}
}

// Close stops reading and closes the answer, which ends the request at the
// remote; it waits for the reading goroutine.
func (s *Stream) Close() {
	s.once.Do(func() {
		close(s.stop)
		s.body.Close()
		<-s.done
	})
}
