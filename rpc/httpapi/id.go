package httpapi

import (
	"crypto/rand"
	"time"
)

// Generated job ids are ULID-shaped: 26 Crockford base32 characters, a
// 48-bit millisecond timestamp followed by 80 random bits. Time first means
// generated ids sort roughly by creation, which keeps a collection's ids
// readable in listings; 80 random bits make collisions negligible without
// coordination between nodes. Every character is in the job id alphabet.
const (
	idLen     = 26
	idRandLen = 10
	crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
)

// newIDs returns n fresh ids for the instant now, drawing all the
// randomness in one read.
func newIDs(now time.Time, n int) []string {
	rnd := make([]byte, idRandLen*n)
	_, _ = rand.Read(rnd) // crypto/rand.Read never fails (Go ≥ 1.24)
	ids := make([]string, n)
	for i := range ids {
		ids[i] = encodeID(now, rnd[i*idRandLen:(i+1)*idRandLen])
	}
	return ids
}

// encodeID encodes the 128 bits timestamp(48)|random(80) as 26 base32
// characters, most significant first (the first character carries the 3
// top bits, so 2 leading zero bits pad 128 to 130).
func encodeID(now time.Time, rnd []byte) string {
	var v [16]byte
	ms := uint64(max(now.UnixMilli(), 0)) & (1<<48 - 1)
	for i := 0; i < 6; i++ {
		v[i] = byte(ms >> (40 - 8*i))
	}
	copy(v[6:], rnd)
	var out [idLen]byte
	for i := range out {
		var c byte
		for k := 0; k < 5; k++ {
			pos := 5*i + k - 2 // bit index into v, MSB first
			c <<= 1
			if pos >= 0 {
				c |= (v[pos/8] >> (7 - pos%8)) & 1
			}
		}
		out[i] = crockford[c]
	}
	return string(out[:])
}
