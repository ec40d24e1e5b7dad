package responses

import (
	"container/list"
	"sync"

	"github.com/spoolhq/spool/engine/chat"
)

// State is what is kept of a response for previous_response_id and GET
// /v1/responses/{id}: the conversation including its reply, and the
// response.
type State struct {
	History  []chat.Message
	Response *Response
}

// Store keeps the latest responses in memory for previous_response_id,
// evicting the least recently used. A nil store keeps and finds nothing.
// It is safe for concurrent use.
type Store struct {
	mu    sync.Mutex
	limit int
	order *list.List // of string ids, most recent at the front
	items map[string]*storeEntry
}

type storeEntry struct {
	state *State
	elem  *list.Element
}

// NewStore keeps at most limit responses.
func NewStore(limit int) *Store {
	return &Store{limit: limit, order: list.New(), items: map[string]*storeEntry{}}
}

// Get finds the response id.
func (s *Store) Get(id string) (*State, bool) {
	if s == nil {
		return nil, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.items[id]
	if !ok {
		return nil, false
	}
	s.order.MoveToFront(e.elem)
	return e.state, true
}

// Put keeps the response id.
func (s *Store) Put(id string, st *State) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.items[id]; ok {
		e.state = st
		s.order.MoveToFront(e.elem)
		return
	}
	s.items[id] = &storeEntry{state: st, elem: s.order.PushFront(id)}
	for s.order.Len() > s.limit {
		last := s.order.Back()
		s.order.Remove(last)
		delete(s.items, last.Value.(string))
	}
}
