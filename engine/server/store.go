package server

import (
	"container/list"
	"sync"
)

// responseStore keeps the latest responses in memory for
// previous_response_id, evicting the least recently used. A nil store keeps
// and finds nothing.
type responseStore struct {
	mu    sync.Mutex
	limit int
	order *list.List // of string ids, most recent at the front
	items map[string]*storeEntry
}

type storeEntry struct {
	state *responseState
	elem  *list.Element
}

func newResponseStore(limit int) *responseStore {
	return &responseStore{limit: limit, order: list.New(), items: map[string]*storeEntry{}}
}

func (s *responseStore) get(id string) (*responseState, bool) {
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

func (s *responseStore) put(id string, st *responseState) {
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
