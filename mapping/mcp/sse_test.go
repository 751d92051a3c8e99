package mcp

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestEventReader(t *testing.T) {
	stream := "\n: keep-alive\n\n" +
		"id: 7\r\nevent: message\r\ndata: {\"jsonrpc\":\"2.0\",\r\ndata: \"id\":1,\"result\":{}}\r\n\r\n" +
		"event: ping\ndata: x\n\n" +
		"data: last"
	rd := NewEventReader(strings.NewReader(stream), 1<<20)
	var raw bytes.Buffer
	var events []Event
	for {
		ev, err := rd.Next()
		raw.Write(ev.Raw)
		if len(ev.Raw) > 0 {
			events = append(events, ev)
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	// Relaying every event's Raw gives the stream back byte for byte.
	if raw.String() != stream {
		t.Fatalf("raw bytes differ:\n%q\nwant\n%q", raw.String(), stream)
	}
	if len(events) != 4 {
		t.Fatalf("%d events, want 4", len(events))
	}
	for i, tc := range []struct {
		desc string
		data string
		ok   bool
	}{
		{desc: "comment only", ok: false},
		{desc: "message event over two data lines", data: "{\"jsonrpc\":\"2.0\",\n\"id\":1,\"result\":{}}", ok: true},
		{desc: "another event type", ok: false},
		{desc: "unterminated last event without a name", data: "last", ok: true},
	} {
		data, ok := events[i].MessageData()
		if ok != tc.ok || string(data) != tc.data {
			t.Errorf("%s: MessageData = %q, %v; want %q, %v", tc.desc, data, ok, tc.data, tc.ok)
		}
	}

	// A rewritten message keeps the event's other fields, in order.
	var out bytes.Buffer
	events[1].WriteWithData(&out, []byte("{\"a\":1}\n{\"b\":2}"))
	if want := "id: 7\nevent: message\ndata: {\"a\":1}\ndata: {\"b\":2}\n\n"; out.String() != want {
		t.Fatalf("WriteWithData = %q, want %q", out.String(), want)
	}
	out.Reset()
	WriteMessageEvent(&out, []byte(`{"id":2}`))
	if want := "event: message\ndata: {\"id\":2}\n\n"; out.String() != want {
		t.Fatalf("WriteMessageEvent = %q, want %q", out.String(), want)
	}
}

func TestEventReaderLimit(t *testing.T) {
	rd := NewEventReader(strings.NewReader("data: "+strings.Repeat("x", 100)+"\n\n"), 64)
	if _, err := rd.Next(); !errors.Is(err, ErrEventTooLarge) {
		t.Fatalf("err = %v, want ErrEventTooLarge", err)
	}
	rd = NewEventReader(strings.NewReader("data: "+strings.Repeat("x", 40)+"\n\n"), 64)
	if _, err := rd.Next(); err != nil {
		t.Fatalf("an event within the limit: %v", err)
	}
}

func TestBodySingleID(t *testing.T) {
	for _, tc := range []struct {
		desc, body, want string
	}{
		{desc: "single request", body: `{"jsonrpc":"2.0","id":"a","method":"tools/list"}`, want: `"a"`},
		{desc: "batch of one", body: `[{"jsonrpc":"2.0","id":"a","method":"tools/list"}]`, want: ""},
	} {
		b, err := ParseBody([]byte(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		if got := string(b.SingleID()); got != tc.want {
			t.Errorf("%s: SingleID = %q, want %q", tc.desc, got, tc.want)
		}
	}
}

func TestEventReaderSkipsALeadingByteOrderMark(t *testing.T) {
	in := "\ufeffdata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n"
	ev, err := NewEventReader(strings.NewReader(in), 1<<20).Next()
	if err != nil {
		t.Fatal(err)
	}
	data, ok := ev.MessageData()
	if !ok || string(data) != `{"jsonrpc":"2.0","id":1,"result":{}}` || string(ev.Raw) != in {
		t.Fatalf("data %q ok %v raw %q", data, ok, ev.Raw)
	}
}
