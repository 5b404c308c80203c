package httpapi

import (
	"encoding/base64"
	"encoding/binary"
	"errors"

	"github.com/timemachine-db/timemachine/model"
)

// The list cursor is opaque to clients: base64url (no padding) of a version
// byte, the zigzag varint trigger time and the id. The version byte lets the
// encoding change without misreading cursors that clients still hold.
const (
	cursorV1     = 1
	maxCursorLen = 512 // base64 characters; a v1 cursor is at most ~360
)

var cursorEncoding = base64.RawURLEncoding.Strict()

// encodeCursor renders a list position as a next_cursor ("" for nil).
func encodeCursor(p *model.ListPos) string {
	if p == nil {
		return ""
	}
	buf := make([]byte, 0, 1+binary.MaxVarintLen64+len(p.ID))
	buf = append(buf, cursorV1)
	buf = binary.AppendVarint(buf, p.Trigger)
	buf = append(buf, p.ID...)
	return cursorEncoding.EncodeToString(buf)
}

var errBadCursor = errors.New("not a cursor this server issued")

// decodeCursor is the inverse of encodeCursor. It never panics on any
// input (fuzzed) and refuses anything encodeCursor cannot have produced
// from a job's position.
func decodeCursor(s string) (*model.ListPos, error) {
	if s == "" || len(s) > maxCursorLen {
		return nil, errBadCursor
	}
	if !isCursorText(s) {
		return nil, errBadCursor
	}
	b, err := cursorEncoding.DecodeString(s)
	if err != nil {
		return nil, errBadCursor
	}
	if len(b) < 2 || b[0] != cursorV1 {
		return nil, errBadCursor
	}
	t, n := binary.Varint(b[1:])
	if n <= 0 {
		return nil, errBadCursor
	}
	id := string(b[1+n:])
	// An empty id is a valid position (before every id at that time).
	if id != "" && !validID(id) {
		return nil, errBadCursor
	}
	// Refuse non-minimal varints so each position has exactly one cursor.
	if binary.PutVarint(make([]byte, binary.MaxVarintLen64), t) != n {
		return nil, errBadCursor
	}
	return &model.ListPos{Trigger: t, ID: id}, nil
}

// The schedule list's cursor is opaque too: base64url (no padding) of
// cursorSchedV1 and the last id of the page. Until 2026-11-28 it was the
// bare id, so any id-shaped string — a corrupted cursor, "zzz" — was taken
// as a position and answered an empty last page where a client should
// have been told its cursor is wrong. A bare-id cursor is now a 400: a
// client paging across that upgrade starts its list again.
const cursorSchedV1 = 2

// encodeScheduleCursor renders the position after schedule id.
func encodeScheduleCursor(id string) string {
	return cursorEncoding.EncodeToString(append([]byte{cursorSchedV1}, id...))
}

// decodeScheduleCursor is the inverse of encodeScheduleCursor; it never
// panics and refuses what encodeScheduleCursor cannot have produced.
func decodeScheduleCursor(s string) (string, error) {
	if s == "" || len(s) > maxCursorLen {
		return "", errBadCursor
	}
	if !isCursorText(s) {
		return "", errBadCursor
	}
	b, err := cursorEncoding.DecodeString(s)
	if err != nil || len(b) < 2 || b[0] != cursorSchedV1 {
		return "", errBadCursor
	}
	id := string(b[1:])
	if model.CheckScheduleID(id) != nil {
		return "", errBadCursor
	}
	return id, nil
}

// isCursorText: only base64url characters. encoding/base64 silently skips
// CR and LF; a cursor has none.
func isCursorText(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}
