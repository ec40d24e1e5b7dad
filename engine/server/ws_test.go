package server

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// dialEvents opens n events websockets on addr and reads each one's hello.
func dialEvents(t *testing.T, addr string, n int) []*websocket.Conn {
	t.Helper()
	conns := make([]*websocket.Conn, 0, n)
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	for i := range n {
		c, _, err := websocket.DefaultDialer.Dial("ws://"+addr+eventsPath, nil)
		if err != nil {
			t.Fatalf("websocket %d: %v", i, err)
		}
		conns = append(conns, c)
		var hello Event
		if err := c.ReadJSON(&hello); err != nil || hello.Type != "hello" {
			t.Fatalf("websocket %d: hello %v %v", i, hello, err)
		}
	}
	return conns
}

// chatStatus posts a short greedy chat request on a fresh connection.
func chatStatus(t *testing.T, addr string) int {
	t.Helper()
	raw, _ := json.Marshal(chatBody(map[string]any{"max_tokens": 2}))
	resp, err := http.Post("http://"+addr+"/v1/chat/completions", "application/json", bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// waitSubscribers waits until the hub counts n subscribers.
func waitSubscribers(t *testing.T, srv *Server, n int) {
	t.Helper()
	for i := 0; srv.hub.n.Load() != int32(n); i++ {
		if i > 20000 {
			t.Fatalf("the hub counts %d subscribers, want %d", srv.hub.n.Load(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// A websocket leaves the connection guard when it is hijacked: 64
// subscribers made every POST answer 503 too_many_connections.
func TestEventsLeaveTheConnectionGuard(t *testing.T) {
	ts := newTestServer(t, serverOpts{cfg: Config{MaxConnections: 4}})
	addr := serveReal(t, ts.srv)
	dialEvents(t, addr, 12)
	if n := ts.srv.guard.OpenConnections(); n != 0 {
		t.Errorf("the guard counts %d connections with only websockets open, want 0", n)
	}
	if code := chatStatus(t, addr); code != 200 {
		t.Fatalf("a chat request with 12 websockets open (4 connections allowed): %d", code)
	}
}

// The subscribers have their own cap: past it an upgrade answers 503
// too_many_subscribers, the API still answers, and a closed subscriber's
// place is reused.
func TestEventsSubscriberCap(t *testing.T) {
	ts := newTestServer(t, serverOpts{cfg: Config{MaxSubscribers: 3}})
	addr := serveReal(t, ts.srv)
	conns := dialEvents(t, addr, 3)
	_, resp, err := websocket.DefaultDialer.Dial("ws://"+addr+eventsPath, nil)
	if err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("a fourth subscriber: %v %v", resp, err)
	}
	var body map[string]any
	json.NewDecoder(resp.Body).Decode(&body)
	if jpath(body, "error", "code") != "too_many_subscribers" {
		t.Fatalf("a fourth subscriber's answer: %v", body)
	}
	if code := chatStatus(t, addr); code != 200 {
		t.Fatalf("a chat request with the subscribers full: %d", code)
	}
	conns[0].Close()
	waitSubscribers(t, ts.srv, 2)
	dialEvents(t, addr, 1)
}

// A peer that stops answering pings is closed and leaves the hub; one that
// answers stays through many ping rounds.
func TestEventsDeadPeerTimesOut(t *testing.T) {
	ts := newTestServer(t, serverOpts{noRun: true})
	ts.srv.hub.ping, ts.srv.hub.pongWait = 5*time.Millisecond, time.Second
	addr := serveReal(t, ts.srv)

	// The live peer reads (gorilla answers pings) and counts the pings.
	live := dialEvents(t, addr, 1)[0]
	var pings atomic.Int32
	live.SetPingHandler(func(data string) error {
		pings.Add(1)
		return live.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(time.Second))
	})
	go func() {
		for {
			if _, _, err := live.NextReader(); err != nil {
				return
			}
		}
	}()

	// The dead peer upgrades and then reads and answers nothing.
	dead, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	req := "GET " + eventsPath + " HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
	if _, err := dead.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	waitSubscribers(t, ts.srv, 2)
	// The dead peer is dropped while the live one keeps answering pings.
	waitSubscribers(t, ts.srv, 1)
	seen := pings.Load()
	for i := 0; pings.Load() < seen+20; i++ {
		if i > 20000 {
			t.Fatalf("the live peer got %d pings", pings.Load())
		}
		time.Sleep(time.Millisecond)
	}
	if n := ts.srv.hub.n.Load(); n != 1 {
		t.Fatalf("after 20 more pings the hub counts %d subscribers, want the live one", n)
	}
}

// The API answers while 1,000 websocket clients are connected.
func TestChatWith1000Websockets(t *testing.T) {
	ts := newTestServer(t, serverOpts{})
	addr := serveReal(t, ts.srv)
	dialEvents(t, addr, 1000)
	if code := chatStatus(t, addr); code != 200 {
		t.Fatalf("a chat request with 1,000 websockets open: %d", code)
	}
	if n := ts.srv.hub.n.Load(); n != 1000 {
		t.Fatalf("the hub counts %d subscribers, want 1000", n)
	}
}

// The Responses WebSocket mode has the same bounds: its connections have
// their own cap (past it 503 too_many_subscribers), leave the connection
// guard, and one whose peer answers no ping is closed and frees its place.
func TestResponsesSocketCapAndDeadPeer(t *testing.T) {
	ts := newTestServer(t, serverOpts{cfg: Config{MaxSubscribers: 3, MaxConnections: 2}})
	ts.srv.hub.ping, ts.srv.hub.pongWait = 5*time.Millisecond, time.Second
	addr := serveReal(t, ts.srv)
	url := "ws://" + addr + "/v1/responses"
	live := func() {
		c, _, err := websocket.DefaultDialer.Dial(url, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		go func() { // reading answers the pings
			for {
				if _, _, err := c.NextReader(); err != nil {
					return
				}
			}
		}()
	}
	live()
	live()
	dead, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	req := "GET /v1/responses HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
	if _, err := dead.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	for i := 0; ts.srv.hub.sockets.Load() != 3; i++ {
		if i > 20000 {
			t.Fatalf("%d sockets open, want 3", ts.srv.hub.sockets.Load())
		}
		time.Sleep(time.Millisecond)
	}
	if _, resp, err := websocket.DefaultDialer.Dial(url, nil); err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a fourth socket: %v %v", resp, err)
	}
	if code := chatStatus(t, addr); code != 200 {
		t.Fatalf("a chat request with the sockets full (2 connections allowed): %d", code)
	}
	// The dead peer is closed, and its place taken again.
	for i := 0; ts.srv.hub.sockets.Load() != 2; i++ {
		if i > 20000 {
			t.Fatalf("%d sockets open, want the 2 live ones", ts.srv.hub.sockets.Load())
		}
		time.Sleep(time.Millisecond)
	}
	live()
	if n := ts.srv.hub.sockets.Load(); n != 3 {
		t.Fatalf("%d sockets open, want 3", n)
	}
}
