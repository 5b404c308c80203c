package raftfsm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/timemachine-db/timemachine/model"
)

// ErrCorrupt reports bytes that do not decode: a command, record or snapshot
// written by something other than this codec, or damaged on disk.
var ErrCorrupt = errors.New("raftfsm: corrupt encoding")

// ErrNewerCommand reports a command type or version this binary does not
// know: a newer binary wrote it (a rolling upgrade half done). A replica
// must not skip such an entry — its state would drift from its peers' —
// so the state machines stop the node on it (wrapped with ErrCorrupt).
var ErrNewerCommand = errors.New("a command this binary does not know (written by a newer timemachine)")

// reader decodes the compact binary formats. It records the first error and
// turns every later read into a zero value, so decoders read straight through
// and check once at the end.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", ErrCorrupt, what)
	}
	r.b = nil
}

func (r *reader) byte() byte {
	if r.err != nil || len(r.b) < 1 {
		r.fail("short byte")
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail("bad uvarint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail("bad varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) u64() uint64 {
	if r.err != nil || len(r.b) < 8 {
		r.fail("short u64")
		return 0
	}
	v := binary.BigEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

func (r *reader) f64() float64 { return math.Float64frombits(r.u64()) }

// bytes returns a length-prefixed byte string, aliasing the input.
func (r *reader) bytes(max int) []byte {
	n := r.uvarint()
	if r.err != nil {
		return nil
	}
	if n > uint64(max) || n > uint64(len(r.b)) {
		r.fail("byte string too long")
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) str(max int) string { return string(r.bytes(max)) }

func (r *reader) done() error {
	if r.err == nil && len(r.b) != 0 {
		r.fail("trailing bytes")
	}
	return r.err
}

func putBytes(dst, v []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(v)))
	return append(dst, v...)
}

func putStr(dst []byte, v string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(v)))
	return append(dst, v...)
}

func putF64(dst []byte, v float64) []byte {
	return binary.BigEndian.AppendUint64(dst, math.Float64bits(v))
}

// Size limits enforced by the decoders, so corrupt input cannot make them
// allocate without bound. They come from model's limits, which validation
// enforces too: whatever the API accepts decodes again.
const (
	maxStr     = model.MaxFieldBytes
	maxMeta    = model.MaxMetaBytesLimit
	maxEntries = 1 << 20
)
