//lint:file-ignore SA1019 raft v1.7.3 still fills and reads the deprecated Leader field of a heartbeat (older peers send only it), so a coalesced heartbeat must carry it unchanged.

package beat

import (
	"encoding/binary"
	"errors"

	"github.com/hashicorp/raft"
)

// maxItems bounds the heartbeats of one call (checked before allocating).
const maxItems = 1 << 16

// maxBytes bounds one id, address or message field.
const maxBytes = 1 << 10

var errMalformed = errors.New("beat: malformed heartbeat batch")

// item is one heartbeat on the wire.
type item struct {
	group uint16
	req   raft.AppendEntriesRequest
}

// answer is one heartbeat's answer on the wire.
type answer struct {
	resp raft.AppendEntriesResponse
	err  string // non-empty: this heartbeat failed
	// remote: err is the peer's answer for this heartbeat, not a failure
	// of the call (not encoded; set by the receiving side).
	remote bool
	// old: the peer does not know MethodHeartbeats (an older binary; not
	// encoded).
	old bool
}

func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

func encodeItems(dst []byte, items []item) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(items)))
	for i := range items {
		it := &items[i]
		dst = binary.BigEndian.AppendUint16(dst, it.group)
		dst = binary.AppendUvarint(dst, it.req.Term)
		dst = binary.AppendUvarint(dst, uint64(it.req.ProtocolVersion))
		dst = appendBytes(dst, it.req.ID)
		dst = appendBytes(dst, it.req.Addr)
		dst = appendBytes(dst, it.req.Leader)
	}
	return dst
}

func encodeAnswers(dst []byte, as []answer) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(as)))
	for i := range as {
		a := &as[i]
		if a.err != "" {
			dst = append(dst, 1)
			msg := a.err
			if len(msg) > maxBytes {
				msg = msg[:maxBytes]
			}
			dst = appendBytes(dst, []byte(msg))
			continue
		}
		dst = append(dst, 0)
		dst = binary.AppendUvarint(dst, a.resp.Term)
		dst = binary.AppendUvarint(dst, a.resp.LastLog)
		var flags byte
		if a.resp.Success {
			flags |= 1
		}
		if a.resp.NoRetryBackoff {
			flags |= 2
		}
		dst = append(dst, flags)
		dst = binary.AppendUvarint(dst, uint64(a.resp.ProtocolVersion))
		dst = appendBytes(dst, a.resp.ID)
		dst = appendBytes(dst, a.resp.Addr)
	}
	return dst
}

// reader decodes a body; the first error sticks.
type reader struct {
	b   []byte
	err error
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errMalformed
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) byte() byte {
	if r.err != nil || len(r.b) < 1 {
		r.err = errMalformed
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *reader) u16() uint16 {
	if r.err != nil || len(r.b) < 2 {
		r.err = errMalformed
		return 0
	}
	v := binary.BigEndian.Uint16(r.b)
	r.b = r.b[2:]
	return v
}

// bytes returns a copy (nil when empty), so nothing aliases the body.
func (r *reader) bytes() []byte {
	n := r.uvarint()
	if r.err != nil {
		return nil
	}
	if n > maxBytes || n > uint64(len(r.b)) {
		r.err = errMalformed
		return nil
	}
	if n == 0 {
		return nil
	}
	out := append([]byte(nil), r.b[:n]...)
	r.b = r.b[n:]
	return out
}

func (r *reader) count() int {
	n := r.uvarint()
	// Every item takes at least one byte: a count beyond the body is a lie.
	if r.err == nil && (n > maxItems || n > uint64(len(r.b))) {
		r.err = errMalformed
	}
	if r.err != nil {
		return 0
	}
	return int(n)
}

func (r *reader) done() error {
	if r.err == nil && len(r.b) != 0 {
		r.err = errMalformed
	}
	return r.err
}

func decodeItems(b []byte) ([]item, error) {
	r := &reader{b: b}
	n := r.count()
	items := make([]item, 0, n)
	for i := 0; i < n && r.err == nil; i++ {
		var it item
		it.group = r.u16()
		it.req.Term = r.uvarint()
		it.req.ProtocolVersion = raft.ProtocolVersion(r.uvarint())
		it.req.ID = r.bytes()
		it.req.Addr = r.bytes()
		it.req.Leader = r.bytes()
		items = append(items, it)
	}
	if err := r.done(); err != nil {
		return nil, err
	}
	return items, nil
}

func decodeAnswers(b []byte) ([]answer, error) {
	r := &reader{b: b}
	n := r.count()
	as := make([]answer, 0, n)
	for i := 0; i < n && r.err == nil; i++ {
		var a answer
		switch r.byte() {
		case 0:
			a.resp.Term = r.uvarint()
			a.resp.LastLog = r.uvarint()
			flags := r.byte()
			a.resp.Success = flags&1 != 0
			a.resp.NoRetryBackoff = flags&2 != 0
			a.resp.ProtocolVersion = raft.ProtocolVersion(r.uvarint())
			a.resp.ID = r.bytes()
			a.resp.Addr = r.bytes()
		case 1:
			a.err = string(r.bytes())
			if a.err == "" {
				a.err = "failed"
			}
		default:
			r.err = errMalformed
		}
		as = append(as, a)
	}
	if err := r.done(); err != nil {
		return nil, err
	}
	return as, nil
}
