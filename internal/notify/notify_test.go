package notify

import "testing"

func TestNotifier(t *testing.T) {
	var n Notifier
	if n.Active() {
		t.Fatal("active without subscribers")
	}
	a, stopA := n.Subscribe()
	b, stopB := n.Subscribe()
	n.Notify()
	n.Notify() // coalesced with the first
	for _, ch := range []<-chan struct{}{a, b} {
		select {
		case <-ch:
		default:
			t.Fatal("a subscriber missed the change")
		}
		select {
		case <-ch:
			t.Fatal("two changes before a read gave two signals")
		default:
		}
	}
	stopA()
	n.Notify()
	select {
	case <-a:
		t.Fatal("an ended subscription was signalled")
	default:
	}
	<-b
	stopB()
	if n.Active() {
		t.Fatal("active after every subscription ended")
	}
}
