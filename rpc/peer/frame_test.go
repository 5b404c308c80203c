package peer

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"
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
