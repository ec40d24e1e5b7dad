// Package notify tells subscribers that something changed: a Notifier's
// subscribers each get a channel that holds at most one pending signal, so
// a slow subscriber misses no change (it reads the state afresh) and never
// holds the notifier up.
package notify

import "sync"

// Notifier signals its subscribers. The zero value is ready; it is safe
// for concurrent use.
type Notifier struct {
	mu   sync.Mutex
	subs map[chan struct{}]struct{}
}

// Subscribe returns a channel that receives a signal after each change
// (several changes before a read give one signal), and the function that
// ends the subscription.
func (n *Notifier) Subscribe() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	n.mu.Lock()
	if n.subs == nil {
		n.subs = map[chan struct{}]struct{}{}
	}
	n.subs[ch] = struct{}{}
	n.mu.Unlock()
	return ch, func() {
		n.mu.Lock()
		delete(n.subs, ch)
		n.mu.Unlock()
	}
}

// Notify signals every subscriber.
func (n *Notifier) Notify() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for ch := range n.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// Active reports whether anyone subscribes.
func (n *Notifier) Active() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.subs) > 0
}
