package peer

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Frame limits. The bound is checked before anything is allocated from a
// length read off the wire.
const (
	// MaxFrameSize bounds a frame's length field (everything after it).
	MaxFrameSize = 64 << 20
	// MaxBodySize is the largest request or answer body.
	MaxBodySize = MaxFrameSize - frameFixed
)

const (
	lenFieldSize = 4
	frameFixed   = 8 + 1 + 1 // id, kind, method
	headerSize   = lenFieldSize + frameFixed
)

// Frame kinds.
const (
	kindRequest  byte = 1
	kindOK       byte = 2
	kindError    byte = 3
	kindPing     byte = 4
	kindPong     byte = 5
	maxKindValue      = kindPong
)

const (
	// readBufSize is the per-connection read buffer: many small frames are
	// read with one syscall, large payloads bypass it.
	readBufSize = 64 << 10
	// eagerAlloc is the payload size allocated in one go. Above it the
	// buffer grows as bytes actually arrive, so a peer announcing 64 MiB and
	// sending nothing costs us nothing.
	eagerAlloc = 1 << 20
	// copySmall: bodies up to this size are copied next to their header so
	// a batch of small frames goes out as one contiguous buffer; larger ones
	// are written in place (writev) to avoid copying MiBs.
	copySmall = 4 << 10
	// writeTimeout bounds one batched write. A peer that stops reading for
	// this long is treated as dead rather than letting writes pile up.
	writeTimeout = 10 * time.Second
)

var errBadFrame = errors.New("peer: malformed frame")

type frame struct {
	id      uint64
	kind    byte
	method  byte
	payload []byte
}

// frameReader reads frames off one connection. Not safe for concurrent use:
// each connection has exactly one reader goroutine.
type frameReader struct {
	br  *bufio.Reader
	hdr [headerSize]byte
}

func newFrameReader(r io.Reader) *frameReader {
	return &frameReader{br: bufio.NewReaderSize(r, readBufSize)}
}

// read returns the next frame. The payload is freshly allocated and belongs
// to the caller.
func (fr *frameReader) read() (frame, error) {
	if _, err := io.ReadFull(fr.br, fr.hdr[:]); err != nil {
		return frame{}, err
	}
	n := binary.BigEndian.Uint32(fr.hdr[0:4])
	if n < frameFixed {
		return frame{}, fmt.Errorf("%w: length %d below the fixed header", errBadFrame, n)
	}
	if n > MaxFrameSize {
		return frame{}, fmt.Errorf("%w: announced %d bytes, limit %d", ErrFrameTooLarge, n, MaxFrameSize)
	}
	f := frame{
		id:     binary.BigEndian.Uint64(fr.hdr[4:12]),
		kind:   fr.hdr[12],
		method: fr.hdr[13],
	}
	if f.kind == 0 || f.kind > maxKindValue {
		return frame{}, fmt.Errorf("%w: unknown kind %d", errBadFrame, f.kind)
	}
	size := int(n) - frameFixed
	if size == 0 {
		return f, nil
	}
	var err error
	f.payload, err = readPayload(fr.br, size)
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return frame{}, err
	}
	return f, nil
}

// readPayload reads exactly size bytes. size is already bounded by
// MaxBodySize; above eagerAlloc the buffer only grows as data arrives.
func readPayload(r io.Reader, size int) ([]byte, error) {
	if size <= eagerAlloc {
		p := make([]byte, size)
		_, err := io.ReadFull(r, p)
		return p, err
	}
	p := make([]byte, 0, eagerAlloc)
	for len(p) < size {
		if len(p) == cap(p) {
			grown := make([]byte, len(p), min(2*cap(p), size))
			copy(grown, p)
			p = grown
		}
		k, err := io.ReadFull(r, p[len(p):min(cap(p), size)])
		p = p[:len(p)+k]
		if err != nil {
			return nil, err
		}
	}
	return p, nil
}

// encodeError is the response-error payload: u16 len(code) | code | message.
func encodeError(e *RemoteError) []byte {
	code := e.Code
	if len(code) > 0xFFFF {
		code = code[:0xFFFF]
	}
	msg := e.Message
	if max := MaxBodySize - 2 - len(code); len(msg) > max {
		msg = msg[:max]
	}
	p := make([]byte, 2+len(code)+len(msg))
	binary.BigEndian.PutUint16(p, uint16(len(code)))
	copy(p[2:], code)
	copy(p[2+len(code):], msg)
	return p
}

func decodeError(p []byte) (*RemoteError, error) {
	if len(p) < 2 {
		return nil, fmt.Errorf("%w: error payload of %d bytes", errBadFrame, len(p))
	}
	n := int(binary.BigEndian.Uint16(p))
	if 2+n > len(p) {
		return nil, fmt.Errorf("%w: error code length %d beyond payload", errBadFrame, n)
	}
	return &RemoteError{Code: string(p[2 : 2+n]), Message: string(p[2+n:])}, nil
}

// liveReader records when bytes last arrived, so a connection that is busy
// receiving one huge frame is not mistaken for a dead one.
type liveReader struct {
	r    io.Reader
	last *atomic.Int64 // monotonic nanoseconds, see now()
}

func (l liveReader) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	if n > 0 {
		l.last.Store(now())
	}
	return n, err
}

var epoch = time.Now()

// now is a monotonic clock reading in nanoseconds, cheap to store atomically.
func now() int64 { return int64(time.Since(epoch)) }

// frameWriter owns the write side of one connection. Senders enqueue and
// return at once; one goroutine writes whatever has accumulated in one
// (vectored) write. So a caller never blocks on the socket — its ctx stays
// in charge — and under load many small frames share a syscall.
//
// Except when the connection is idle: a small frame (up to directMax) sent
// while nothing is queued or being written is written by the sender itself
// (sendDirect). Waking the writer goroutine for it cost a goroutine
// wake-up per frame — on an idle node, where nearly every frame is a
// liveness ping, a pong, a heartbeat batch or its answer, that was ~20 %
// of all wake-ups (docs/scaling.md, fifth pass). The socket takes a small
// write at once unless the peer stopped reading long enough to fill its
// buffers; then that one sender blocks, up to writeTimeout as the writer
// goroutine would, and everything sent meanwhile queues behind it.
type frameWriter struct {
	conn    net.Conn
	onError func(error) // called once, by whoever's write failed first

	mu     sync.Mutex
	queue  []frame
	busy   bool   // a write is under way (the goroutine's or a sender's)
	direct []byte // sendDirect's buffer, used only while it holds busy
	err    error  // set once stopped; send fails with it
	wake   chan struct{}
	done   chan struct{}
	queued atomic.Int64 // bytes enqueued and not yet written
	failed sync.Once    // onError
}

// directMax is the largest payload a sender writes itself (sendDirect).
const directMax = copySmall

func newFrameWriter(conn net.Conn, onError func(error)) *frameWriter {
	w := &frameWriter{conn: conn, onError: onError, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go w.run()
	return w
}

// send writes f now if the connection is idle and f small, else enqueues
// it. The payload is referenced, not copied, until written: the caller
// must not modify it afterwards.
func (w *frameWriter) send(f frame) error {
	w.mu.Lock()
	if w.err != nil {
		err := w.err
		w.mu.Unlock()
		return err
	}
	if !w.busy && len(w.queue) == 0 && len(f.payload) <= directMax {
		w.busy = true
		w.mu.Unlock()
		w.sendDirect(f)
		return nil
	}
	w.queue = append(w.queue, f)
	w.mu.Unlock()
	w.queued.Add(int64(headerSize + len(f.payload)))
	select {
	case w.wake <- struct{}{}:
	default:
	}
	return nil
}

// sendDirect writes one small frame on the sender's goroutine; the caller
// set busy. Frames queued meanwhile go to the writer goroutine afterwards.
func (w *frameWriter) sendDirect(f frame) {
	w.direct = appendFrame(w.direct[:0], f) // busy: only this sender uses it
	_ = w.conn.SetWriteDeadline(time.Now().Add(writeTimeout))
	_, err := w.conn.Write(w.direct)
	w.mu.Lock()
	w.busy = false
	more := len(w.queue) > 0
	w.mu.Unlock()
	if err != nil {
		w.fail(err)
		return
	}
	if more {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

func (w *frameWriter) fail(err error) { w.failed.Do(func() { w.onError(err) }) }

// stop makes the writer goroutine exit and later sends fail with err.
// Frames still queued are dropped: stop is only called when the connection
// is being torn down.
func (w *frameWriter) stop(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return
	}
	w.err = err
	w.queue = nil
	close(w.done)
}

func (w *frameWriter) run() {
	var (
		batch   []frame
		scratch []byte
		bufs    net.Buffers
	)
	for {
		select {
		case <-w.wake:
		case <-w.done:
			return
		}
		for {
			w.mu.Lock()
			if w.err != nil {
				w.mu.Unlock()
				return
			}
			if w.busy {
				// A sender is writing (sendDirect): it wakes this
				// goroutine when done if anything is queued.
				w.mu.Unlock()
				break
			}
			batch, w.queue = w.queue, batch[:0]
			w.busy = len(batch) > 0
			w.mu.Unlock()
			if len(batch) == 0 {
				break
			}
			if cap(scratch) > 4<<20 {
				scratch = nil // don't pin a spike's buffer forever
			}
			scratch, bufs = assemble(batch, scratch[:0], bufs[:0])
			var total int64
			for _, b := range bufs {
				total += int64(len(b))
			}
			_ = w.conn.SetWriteDeadline(time.Now().Add(writeTimeout))
			toWrite := bufs // WriteTo consumes the slice it is called on
			_, err := toWrite.WriteTo(w.conn)
			clear(batch) // drop payload references for the GC
			clear(bufs)
			w.queued.Add(-total)
			w.mu.Lock()
			w.busy = false
			w.mu.Unlock()
			if err != nil {
				w.fail(err)
				return
			}
		}
	}
}

// assemble lays out a batch as few buffers as possible: headers and small
// payloads are appended to scratch, large payloads are referenced in place.
func assemble(batch []frame, scratch []byte, bufs net.Buffers) ([]byte, net.Buffers) {
	start := 0
	for _, f := range batch {
		scratch = appendHeader(scratch, f)
		if len(f.payload) <= copySmall {
			scratch = append(scratch, f.payload...)
			continue
		}
		// Earlier slices of scratch stay valid if append reallocates: they
		// keep pointing at the old array, whose bytes never change.
		bufs = append(bufs, scratch[start:], f.payload)
		start = len(scratch)
	}
	if start < len(scratch) {
		bufs = append(bufs, scratch[start:])
	}
	return scratch, bufs
}

// appendHeader appends f's header.
func appendHeader(b []byte, f frame) []byte {
	var h [headerSize]byte
	binary.BigEndian.PutUint32(h[0:4], uint32(frameFixed+len(f.payload)))
	binary.BigEndian.PutUint64(h[4:12], f.id)
	h[12] = f.kind
	h[13] = f.method
	return append(b, h[:]...)
}

// appendFrame appends f, header and payload.
func appendFrame(b []byte, f frame) []byte { return append(appendHeader(b, f), f.payload...) }
