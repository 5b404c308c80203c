package httpapi

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"math/big"
	"strconv"
	"strings"

	"github.com/cespare/xxhash/v2"

	"github.com/timemachine-db/timemachine/model"
)

// HashSpec computes JobSpec.Hash: what identifies a job's spec as the user
// gave it, so that a retried POST is recognised (200, same job) and a
// different one is not (409). triggerAsGiven is the trigger as the user
// gave it: an absolute time as its unix milliseconds in decimal
// ("1767225600000", whether it came as a number or as RFC 3339 text), a
// relative one as written ("delay:90s"), so a retried POST with a relative
// delay hashes the same. (Before 2026-11-27 an RFC 3339 time was hashed as
// its text: a retry straddling that upgrade answers 409.)
//
// The meta is hashed in its canonical form (canonicalMeta), so that the
// same value written another way — keys in another order, 1.0 for 1, an
// escaped letter — is the same spec. (Before 2026-11-28 it was hashed as
// it came, compacted: a retry straddling that upgrade whose meta was not
// already canonical, or was {}, answers 409.)
//
// The hash is stored with every job (SpecHash), so its input encoding is
// frozen: length-prefixed strings and bytes, varints, the multiplier as
// big-endian float bits — exactly as the first release computed it.
func HashSpec(s *model.JobSpec, triggerAsGiven string) uint64 {
	meta := canonicalMeta(s.Meta)
	buf := make([]byte, 0, 64+len(triggerAsGiven)+len(s.CallbackURL)+len(s.Route)+len(meta))
	buf = hashStr(buf, triggerAsGiven)
	buf = hashStr(buf, s.CallbackURL)
	buf = hashStr(buf, s.Route)
	buf = binary.AppendUvarint(buf, uint64(len(meta)))
	buf = append(buf, meta...)
	buf = binary.AppendVarint(buf, s.Retry.MaxAttempts)
	buf = binary.AppendVarint(buf, s.Retry.InitialIntervalMs)
	buf = binary.BigEndian.AppendUint64(buf, math.Float64bits(s.Retry.Multiplier))
	buf = binary.AppendVarint(buf, s.Retry.MaxIntervalMs)
	buf = binary.AppendVarint(buf, s.Retry.MaxAgeMs)
	buf = binary.AppendVarint(buf, s.CallbackTimeoutMs)
	return xxhash.Sum64(buf)
}

func hashStr(dst []byte, v string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(v)))
	return append(dst, v...)
}

// canonicalMeta is one way of writing a meta's JSON value: object keys
// sorted, strings as encoding/json writes them (no HTML escaping), numbers
// as their exact value in shortest decimal ("1.0" and "1e0" are "1",
// "0.50" is "0.5"), and {} the same as no meta (both are sent as {}).
// A meta already written so comes back as it is, so the hashes of jobs
// stored before canonical hashing are unchanged for such metas. A meta
// that does not parse (it always does: the API validated it) is its
// bytes.
func canonicalMeta(meta []byte) []byte {
	if len(meta) == 0 || string(meta) == "{}" {
		return nil
	}
	if isCanonical(meta) {
		return meta // what nearly every meta is: no decode, no encode
	}
	return canonicalSlow(meta)
}

// canonicalSlow is canonicalMeta by decoding and encoding.
func canonicalSlow(meta []byte) []byte {
	dec := json.NewDecoder(bytes.NewReader(meta))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return meta
	}
	var buf bytes.Buffer
	buf.Grow(len(meta))
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(canonicalNumbers(v)); err != nil {
		return meta
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'})
}

// canonicalNumbers rewrites every number in v (decoded with UseNumber)
// to canonicalNumber; maps are written with sorted keys by encoding/json.
func canonicalNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		return canonicalNumber(x)
	case map[string]any:
		for k, e := range x {
			x[k] = canonicalNumbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = canonicalNumbers(e)
		}
	}
	return v
}

// canonicalNumber is n's exact value in shortest decimal: an integer
// without fraction or exponent, any other number as a plain decimal
// fraction. An exponent beyond ±400 stays as written (its decimal form
// could be as long as the exponent is large).
func canonicalNumber(n json.Number) json.Number {
	s := string(n)
	if s == "-0" {
		return "0"
	}
	i := strings.IndexAny(s, ".eE")
	if i < 0 {
		return n // an integer: JSON allows no leading zeros, so it is canonical
	}
	if j := strings.IndexAny(s, "eE"); j >= 0 {
		if e, err := strconv.Atoi(strings.TrimPrefix(s[j+1:], "+")); err != nil || e > 400 || e < -400 {
			return n
		}
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return n
	}
	if r.IsInt() {
		return json.Number(r.Num().String())
	}
	// The denominator of a decimal literal is 2^a·5^b: max(a, b) digits
	// after the point write it exactly.
	d := new(big.Int).Set(r.Denom())
	twos := d.TrailingZeroBits()
	d.Rsh(d, twos)
	fives, five, q, m := uint(0), big.NewInt(5), new(big.Int), new(big.Int)
	for d.Cmp(big.NewInt(1)) > 0 {
		q.QuoRem(d, five, m)
		if m.Sign() != 0 {
			return n // not a decimal fraction (cannot happen for a literal)
		}
		d.Set(q)
		fives++
	}
	return json.Number(r.FloatString(int(max(twos, fives))))
}

// isCanonical reports, without allocating, that b is a JSON value already
// in canonicalMeta's form, for the shapes nearly every meta has: no
// whitespace, object keys in strictly ascending byte order (so none
// twice), strings of printable ASCII without escapes, integers, true,
// false, null, at most 32 levels deep. Anything else — a fraction, an
// exponent, an escape, a byte outside printable ASCII, "-0" — answers
// false and takes the decode-and-encode path, which decides. The decode
// and encode cost a create ~5 % of the node's CPU (a profile of 64
// clients' single creates, 2026-11-28) for a result equal to the input.
func isCanonical(b []byte) bool {
	i, ok := canonicalValue(b, 0, 0)
	return ok && i == len(b)
}

// canonicalValue checks the value at b[i:] and returns where it ends.
func canonicalValue(b []byte, i, depth int) (int, bool) {
	if i >= len(b) || depth > 32 {
		return i, false
	}
	switch c := b[i]; {
	case c == '{':
		i++
		if i < len(b) && b[i] == '}' {
			return i + 1, true
		}
		var prev []byte
		for n := 0; ; n++ {
			start := i
			end, ok := canonicalString(b, i)
			if !ok {
				return i, false
			}
			key := b[start+1 : end-1]
			if n > 0 && bytes.Compare(prev, key) >= 0 {
				return i, false
			}
			prev = key
			if end >= len(b) || b[end] != ':' {
				return i, false
			}
			if i, ok = canonicalValue(b, end+1, depth+1); !ok {
				return i, false
			}
			if i >= len(b) {
				return i, false
			}
			if b[i] == '}' {
				return i + 1, true
			}
			if b[i] != ',' {
				return i, false
			}
			i++
		}
	case c == '[':
		i++
		if i < len(b) && b[i] == ']' {
			return i + 1, true
		}
		for {
			var ok bool
			if i, ok = canonicalValue(b, i, depth+1); !ok || i >= len(b) {
				return i, false
			}
			if b[i] == ']' {
				return i + 1, true
			}
			if b[i] != ',' {
				return i, false
			}
			i++
		}
	case c == '"':
		return canonicalString(b, i)
	case c == '-' || c >= '0' && c <= '9':
		j := i
		if c == '-' {
			j++
		}
		if j >= len(b) || b[j] < '0' || b[j] > '9' {
			return i, false
		}
		if b[j] == '0' { // "0" alone; "-0" and leading zeros are not canonical
			if c == '-' {
				return i, false
			}
			j++
		} else {
			for j < len(b) && b[j] >= '0' && b[j] <= '9' {
				j++
			}
		}
		if j < len(b) && (b[j] == '.' || b[j] == 'e' || b[j] == 'E' || b[j] >= '0' && b[j] <= '9') {
			return i, false
		}
		return j, true
	default:
		for _, lit := range [...]string{"true", "false", "null"} {
			if len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit {
				return i + len(lit), true
			}
		}
		return i, false
	}
}

// canonicalString checks the string at b[i:] (b[i] is its quote): printable
// ASCII with no escape, as encoding/json writes it.
func canonicalString(b []byte, i int) (int, bool) {
	if i >= len(b) || b[i] != '"' {
		return i, false
	}
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return j + 1, true
		case c == '\\' || c < 0x20 || c >= 0x7f:
			return j, false
		}
	}
	return len(b), false
}
