package peer

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/timemachine-db/timemachine/internal/testutil"
)

func encodeBatch(batch []frame) []byte {
	_, bufs := assemble(batch, nil, nil)
	var out bytes.Buffer
	for _, b := range bufs {
		out.Write(b)
	}
	return out.Bytes()
}

// Small payloads are copied next to their headers and large ones referenced
// in place; either way the bytes read back are the frames sent, in order.
func TestFrameRoundTrip(t *testing.T) {
	big := bytes.Repeat([]byte("x"), copySmall+1)
	huge := bytes.Repeat([]byte("y"), eagerAlloc*3+5) // progressive read path
	batch := []frame{
		{id: 1, kind: kindRequest, method: 9, payload: []byte("small")},
		{id: 2, kind: kindOK, payload: big},
		{id: 3, kind: kindPing},
		{id: 1 << 60, kind: kindError, method: 255, payload: encodeError(&RemoteError{Code: "c", Message: "m"})},
		{id: 5, kind: kindRequest, payload: huge},
		{id: 6, kind: kindPong},
	}
	wire := encodeBatch(batch)
	fr := newFrameReader(bytes.NewReader(wire))
	for i, want := range batch {
		got, err := fr.read()
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if got.id != want.id || got.kind != want.kind || got.method != want.method || !bytes.Equal(got.payload, want.payload) {
			t.Fatalf("frame %d: got id %d kind %d method %d len %d", i, got.id, got.kind, got.method, len(got.payload))
		}
	}
	if _, err := fr.read(); err != io.EOF {
		t.Fatalf("after the last frame: %v, want EOF", err)
	}
}

func TestFrameReaderRejects(t *testing.T) {
	hdr := func(n uint32, kind byte) []byte {
		h := make([]byte, headerSize)
		binary.BigEndian.PutUint32(h, n)
		h[12] = kind
		return h
	}
	for name, tc := range map[string]struct {
		wire []byte
		want error
	}{
		"too large":         {hdr(MaxFrameSize+1, kindRequest), ErrFrameTooLarge},
		"max u32":           {hdr(0xFFFFFFFF, kindRequest), ErrFrameTooLarge},
		"below fixed part":  {hdr(frameFixed-1, kindRequest), errBadFrame},
		"kind zero":         {hdr(frameFixed, 0), errBadFrame},
		"unknown kind":      {hdr(frameFixed, 77), errBadFrame},
		"truncated payload": {append(hdr(frameFixed+100, kindRequest), 1, 2, 3), io.ErrUnexpectedEOF},
		"truncated header":  {hdr(frameFixed, kindRequest)[:7], io.ErrUnexpectedEOF},
		// Announces 60 MiB and sends 2 MiB: fails on EOF having allocated
		// only about what arrived.
		"big announce short data": {append(hdr(60<<20, kindRequest), make([]byte, 2<<20)...), io.ErrUnexpectedEOF},
	} {
		_, err := newFrameReader(bytes.NewReader(tc.wire)).read()
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", name, err, tc.want)
		}
	}
}

func TestErrorPayload(t *testing.T) {
	for _, re := range []*RemoteError{{}, {Code: "x"}, {Message: "only message"}, {Code: "not_leader", Message: "leader: n2 at 10.0.0.2:7000"}} {
		got, err := decodeError(encodeError(re))
		if err != nil || *got != *re {
			t.Fatalf("%+v → %+v, %v", re, got, err)
		}
	}
	for _, bad := range [][]byte{nil, {0}, {0, 5, 'a'}} {
		if _, err := decodeError(bad); !errors.Is(err, errBadFrame) {
			t.Fatalf("%v decoded: %v", bad, err)
		}
	}
}

// Whatever arrives, the reader returns frames within bounds or an error;
// it never panics.
func FuzzFrameReader(f *testing.F) {
	f.Add(encodeBatch([]frame{{id: 1, kind: kindRequest, method: 3, payload: []byte("hi")}, {id: 2, kind: kindPing}}))
	f.Add(encodeBatch([]frame{{id: 7, kind: kindError, payload: encodeError(&RemoteError{Code: "a", Message: "b"})}}))
	f.Add([]byte{0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, wire []byte) {
		fr := newFrameReader(bytes.NewReader(wire))
		for {
			fm, err := fr.read()
			if err != nil {
				return
			}
			if len(fm.payload) > MaxBodySize || fm.kind == 0 || fm.kind > maxKindValue {
				t.Fatalf("accepted an out-of-bounds frame: kind %d len %d", fm.kind, len(fm.payload))
			}
			if fm.kind == kindError {
				_, _ = decodeError(fm.payload)
			}
		}
	})
}

// countingConn counts the writes made on it (and can fail them).
type countingConn struct {
	net.Conn
	writes atomic.Int64
	fail   atomic.Bool
}

func (c *countingConn) Write(p []byte) (int, error) {
	if c.fail.Load() {
		return 0, errors.New("broken")
	}
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// Frames sent by many senders at once — small ones, which an idle
// connection's sender writes itself, and large ones, which always go to
// the writer goroutine — all arrive whole and once, and each sender's in
// the order it sent them.
func TestFrameWriterDirectAndQueued(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	conn := &countingConn{Conn: a}
	var errs atomic.Int64
	w := newFrameWriter(conn, func(error) { errs.Add(1) })
	defer w.stop(net.ErrClosed)
	const senders, each = 8, 300
	payload := func(s, i int) []byte {
		n := 8
		if i%17 == 0 {
			n = directMax + 100 // queued
		}
		p := bytes.Repeat([]byte{byte(s)}, n)
		binary.BigEndian.PutUint32(p, uint32(i))
		return p
	}
	var wg sync.WaitGroup
	for s := 0; s < senders; s++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				if err := w.send(frame{id: uint64(s)<<32 | uint64(i), kind: kindRequest, payload: payload(s, i)}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	fr := newFrameReader(b)
	next := make([]int, senders)
	for n := 0; n < senders*each; n++ {
		f, err := fr.read()
		if err != nil {
			t.Fatalf("after %d frames: %v", n, err)
		}
		s, i := int(f.id>>32), int(uint32(f.id))
		if i != next[s] {
			t.Fatalf("sender %d: frame %d arrived, expected %d", s, i, next[s])
		}
		next[s]++
		if !bytes.Equal(f.payload, payload(s, i)) {
			t.Fatalf("sender %d frame %d: payload differs", s, i)
		}
	}
	wg.Wait()
	if errs.Load() != 0 {
		t.Fatalf("%d write errors", errs.Load())
	}
	// An idle connection's small frame is written by its sender: no
	// hand-off to the goroutine (which writes frames queued together in
	// one write, so this count alone does not tell).
	go func() { _, _ = fr.read() }()
	// The reader has every frame, but the writer goroutine may not have
	// marked itself idle yet after its last write: wait for that, or the
	// ping is (rightly) queued behind it.
	testutil.Eventually(t, 5*time.Second, "the writer idle", testutil.True(func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return !w.busy && len(w.queue) == 0
	}))
	before := conn.writes.Load()
	if err := w.send(frame{id: 1, kind: kindPing}); err != nil {
		t.Fatal(err)
	}
	if got := conn.writes.Load() - before; got != 1 {
		t.Fatalf("an idle connection's ping: %d writes done when send returned, want 1", got)
	}
}

// A failed write reports once, whoever wrote (a sender or the goroutine).
func TestFrameWriterFailsOnce(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	conn := &countingConn{Conn: a}
	conn.fail.Store(true)
	var errs atomic.Int64
	w := newFrameWriter(conn, func(error) { errs.Add(1) })
	defer w.stop(net.ErrClosed)
	var wg sync.WaitGroup
	for s := 0; s < 4; s++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				_ = w.send(frame{id: uint64(i), kind: kindRequest, payload: make([]byte, 10+i%2*directMax)})
			}
		}()
	}
	wg.Wait()
	if n := errs.Load(); n != 1 {
		t.Fatalf("onError called %d times", n)
	}
}
