package httpapi

import (
	"fmt"
	"unicode/utf8"
)

// A small validating JSON scanner. Decoding a job object with encoding/json
// (into a map, through reflection, after a separate validity pass) was more
// than half of the cost of a batch create; this scanner validates a body in
// one pass and hands out object members as slices of it, with no
// reflection. It accepts exactly RFC 8259 JSON in UTF-8 (fuzzed against
// encoding/json). Callers copy what they keep: members alias the body.

// maxDepth bounds a body's nesting. encoding/json allows 10,000 levels,
// and so did this scanner until 2026-11-28: a meta nested 9,998 deep was
// accepted, and every list page, batch answer and batched callback that
// held it (a few levels more) was beyond what Go's decoder reads — the
// CLI and every Go client failed on the collection's list (a black-box
// review). 64 keeps every answer within the defaults of common decoders
// (Ruby's 100, serde_json's 128).
const maxDepth = 64

// jsonError is a syntax error at a byte offset of the scanned input.
type jsonError struct {
	msg string
	off int
}

func (e *jsonError) Error() string { return fmt.Sprintf("%s (at byte offset %d)", e.msg, e.off) }

type scanner struct {
	b []byte
	i int
}

func (s *scanner) fail(format string, args ...any) *jsonError {
	return &jsonError{msg: fmt.Sprintf(format, args...), off: s.i}
}

func (s *scanner) unexpected(what string) *jsonError {
	if s.i >= len(s.b) {
		return s.fail("unexpected end of JSON input, expecting %s", what)
	}
	c := s.b[s.i]
	if c < 0x20 || c >= utf8.RuneSelf {
		return s.fail("unexpected byte 0x%02x, expecting %s", c, what)
	}
	return s.fail("unexpected character %q, expecting %s", rune(c), what)
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// value skips one value (after leading whitespace), validating it.
func (s *scanner) value(depth int) *jsonError {
	s.ws()
	if s.i >= len(s.b) {
		return s.unexpected("a value")
	}
	switch c := s.b[s.i]; {
	case c == '{':
		return s.object(depth+1, nil)
	case c == '[':
		return s.array(depth+1, nil)
	case c == '"':
		_, err := s.str()
		return err
	case c == '-' || c >= '0' && c <= '9':
		return s.number()
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	}
	return s.unexpected("a value")
}

func (s *scanner) literal(lit string) *jsonError {
	if len(s.b)-s.i < len(lit) || string(s.b[s.i:s.i+len(lit)]) != lit {
		return s.fail("invalid literal, expecting %s", lit)
	}
	s.i += len(lit)
	return nil
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// number skips -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *scanner) number() *jsonError {
	if s.b[s.i] == '-' {
		s.i++
	}
	switch {
	case s.i < len(s.b) && s.b[s.i] == '0':
		s.i++
	case s.i < len(s.b) && isDigit(s.b[s.i]):
		for s.i < len(s.b) && isDigit(s.b[s.i]) {
			s.i++
		}
	default:
		return s.unexpected("a digit")
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if s.i >= len(s.b) || !isDigit(s.b[s.i]) {
			return s.unexpected("a digit after the decimal point")
		}
		for s.i < len(s.b) && isDigit(s.b[s.i]) {
			s.i++
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if s.i >= len(s.b) || !isDigit(s.b[s.i]) {
			return s.unexpected("a digit in the exponent")
		}
		for s.i < len(s.b) && isDigit(s.b[s.i]) {
			s.i++
		}
	}
	return nil
}

// plainStringByte marks the bytes that stand for themselves inside a string:
// ASCII except the quote, the backslash and control characters.
var plainStringByte = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

func isHex(c byte) bool { return isDigit(c) || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

// str skips a string, validating escapes and UTF-8, and reports whether it
// contained an escape (the caller can then use the raw bytes as is when it
// did not).
func (s *scanner) str() (escaped bool, err *jsonError) {
	s.i++ // opening quote
	for s.i < len(s.b) {
		c := s.b[s.i]
		if plainStringByte[c] {
			s.i++
			continue
		}
		switch {
		case c == '"':
			s.i++
			return escaped, nil
		case c == '\\':
			escaped = true
			s.i++
			if s.i >= len(s.b) {
				return escaped, s.unexpected("an escape character")
			}
			switch s.b[s.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i++
			case 'u':
				s.i++
				for k := 0; k < 4; k++ {
					if s.i >= len(s.b) || !isHex(s.b[s.i]) {
						return escaped, s.unexpected("a hex digit in a \\u escape")
					}
					s.i++
				}
			default:
				return escaped, s.fail("invalid escape %q in a string", "\\"+string(rune(s.b[s.i])))
			}
		case c < 0x20:
			return escaped, s.fail("control character 0x%02x in a string (escape it)", c)
		case c < utf8.RuneSelf:
			s.i++
		default:
			r, size := utf8.DecodeRune(s.b[s.i:])
			if r == utf8.RuneError && size == 1 {
				return escaped, s.fail("invalid UTF-8 in a string")
			}
			s.i += size
		}
	}
	return escaped, s.unexpected("the closing quote of a string")
}

// member is one member of an object: its key and its raw value (a slice of
// the scanned input).
type member struct {
	key string
	raw []byte
}

// object skips an object; when out is non-nil it collects the members.
func (s *scanner) object(depth int, out *object) *jsonError {
	if depth > maxDepth {
		return s.fail("nested too deeply (more than %d levels)", maxDepth)
	}
	s.i++ // '{'
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		return nil
	}
	for {
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != '"' {
			return s.unexpected("a member name (a string)")
		}
		ks := s.i
		esc, err := s.str()
		if err != nil {
			return err
		}
		ke := s.i
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return s.unexpected("':' after a member name")
		}
		s.i++
		s.ws()
		vs := s.i
		if err := s.value(depth); err != nil {
			return err
		}
		if out != nil {
			*out = append(*out, member{key: keyString(s.b[ks:ke], esc), raw: s.b[vs:s.i]})
		}
		s.ws()
		if s.i < len(s.b) && s.b[s.i] == ',' {
			s.i++
			continue
		}
		if s.i < len(s.b) && s.b[s.i] == '}' {
			s.i++
			return nil
		}
		return s.unexpected("',' or '}' in an object")
	}
}

// array skips an array; when out is non-nil it collects the raw elements.
func (s *scanner) array(depth int, out *[][]byte) *jsonError {
	if depth > maxDepth {
		return s.fail("nested too deeply (more than %d levels)", maxDepth)
	}
	s.i++ // '['
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == ']' {
		s.i++
		return nil
	}
	for {
		s.ws()
		vs := s.i
		if err := s.value(depth); err != nil {
			return err
		}
		if out != nil {
			*out = append(*out, s.b[vs:s.i])
		}
		s.ws()
		if s.i < len(s.b) && s.b[s.i] == ',' {
			s.i++
			continue
		}
		if s.i < len(s.b) && s.b[s.i] == ']' {
			s.i++
			return nil
		}
		return s.unexpected("',' or ']' in an array")
	}
}

// end checks that only whitespace follows.
func (s *scanner) end() *jsonError {
	s.ws()
	if s.i < len(s.b) {
		return s.fail("unexpected %q after the JSON value", rune(s.b[s.i]))
	}
	return nil
}

// keyString decodes a member name (quoted, already validated).
func keyString(q []byte, escaped bool) string {
	if !escaped {
		return string(q[1 : len(q)-1])
	}
	return unquote(q)
}

// validJSON validates b as one JSON value (surrounded by whitespace).
func validJSON(b []byte) *jsonError {
	s := scanner{b: b}
	if err := s.value(0); err != nil {
		return err
	}
	return s.end()
}

// parseObject scans b, which must be one JSON object, into its members.
func parseObject(b []byte) (object, *jsonError) {
	s := scanner{b: b}
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != '{' {
		return nil, s.unexpected("'{'")
	}
	o := make(object, 0, 8)
	if err := s.object(1, &o); err != nil {
		return nil, err
	}
	return o, s.end()
}

// batchItem is one element of a batch: its raw bytes and, when it is an
// object, its members.
type batchItem struct {
	raw   []byte
	obj   object
	isObj bool
}

// parseBatch scans b, which must be one JSON array, splitting object
// elements into members in the same pass.
func parseBatch(b []byte) ([]batchItem, *jsonError) {
	s := scanner{b: b}
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != '[' {
		return nil, s.unexpected("'['")
	}
	s.i++
	var out []batchItem
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == ']' {
		s.i++
		return out, s.end()
	}
	for {
		s.ws()
		vs := s.i
		var it batchItem
		if s.i < len(s.b) && s.b[s.i] == '{' {
			it.isObj = true
			it.obj = make(object, 0, 8)
			if err := s.object(2, &it.obj); err != nil {
				return nil, err
			}
		} else if err := s.value(1); err != nil {
			return nil, err
		}
		it.raw = s.b[vs:s.i]
		out = append(out, it)
		s.ws()
		if s.i < len(s.b) && s.b[s.i] == ',' {
			s.i++
			continue
		}
		if s.i < len(s.b) && s.b[s.i] == ']' {
			s.i++
			return out, s.end()
		}
		return nil, s.unexpected("',' or ']' in an array")
	}
}
