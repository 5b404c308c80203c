package webhook

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// Payload is the JSON body of a callback:
//
//	{"id":…,"collection":…,"trigger_time":…,"attempt":…,"meta":{…},"schedule":…}
type Payload struct {
	ID          string
	Collection  string
	TriggerTime int64 // unix ms
	Attempt     int   // 1-based
	// Meta is the job's stored meta, sent verbatim. It must be valid JSON
	// (the developer API validates it when the job is written); nil or empty
	// (a job written without meta) is sent as {}: the contract's body
	// always carries "meta" (API.md §4), and a receiver that reads it
	// should not have to tell a missing field from an empty object.
	Meta json.RawMessage
	// Schedule names the schedule whose occurrence the job is; empty
	// omits the "schedule" field (a job of its own).
	Schedule string
}

// AppendJSON appends the encoded body to dst and returns the extended slice.
//
// It is hand-written rather than json.Marshal because it runs once per fired
// job on the slot-leader's hot path: with a reused dst it does not allocate,
// and it never goes through reflection. Strings are escaped the way
// encoding/json escapes them (including U+2028/U+2029 and replacing invalid
// UTF-8 with U+FFFD), so any JSON parser reads back what encoding/json would.
// Meta is copied as-is; see Payload.Meta for why it is trusted.
func (p *Payload) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"id":`...)
	dst = appendJSONString(dst, p.ID)
	dst = append(dst, `,"collection":`...)
	dst = appendJSONString(dst, p.Collection)
	dst = append(dst, `,"trigger_time":`...)
	dst = strconv.AppendInt(dst, p.TriggerTime, 10)
	dst = append(dst, `,"attempt":`...)
	dst = strconv.AppendInt(dst, int64(p.Attempt), 10)
	dst = append(dst, `,"meta":`...)
	if len(p.Meta) > 0 {
		dst = append(dst, p.Meta...)
	} else {
		dst = append(dst, '{', '}')
	}
	if p.Schedule != "" {
		dst = append(dst, `,"schedule":`...)
		dst = appendJSONString(dst, p.Schedule)
	}
	return append(dst, '}')
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a quoted JSON string. Runs of bytes that need
// no escaping are copied in one append, which is the common case for ids.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		// U+2028 and U+2029 are valid JSON but end a line in JavaScript; a
		// receiver that evals or embeds the body would break on them.
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
