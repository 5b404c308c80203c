package webhook

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Meta is a job's meta: any JSON value, stored by timemachine and echoed in
// every callback exactly as it was written. It is kept as the encoded JSON so
// that nothing is reinterpreted on the way (large integers stay exact, key
// order stays as sent); Decode turns it into the caller's own type.
//
// The zero Meta is "no meta": it is left out of requests and decodes to
// nothing. package client uses this same type (client.Meta), so a callback's
// meta can be put into a new job without conversion.
type Meta []byte

// NewMeta encodes v as a Meta. v may be anything encoding/json encodes; a
// json.RawMessage or []byte holding JSON text should be converted with
// Meta(b) instead (after checking it with json.Valid).
func NewMeta(v any) (Meta, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("webhook: encode meta: %w", err)
	}
	return Meta(b), nil
}

// MustMeta is NewMeta for values that always encode (literals in code and
// tests); it panics if v cannot be encoded.
func MustMeta(v any) Meta {
	m, err := NewMeta(v)
	if err != nil {
		panic(err)
	}
	return m
}

// Decode unmarshals the meta into v. An empty Meta leaves v untouched and
// returns nil, like an absent field.
func (m Meta) Decode(v any) error {
	if len(m) == 0 {
		return nil
	}
	if err := json.Unmarshal(m, v); err != nil {
		return fmt.Errorf("webhook: decode meta: %w", err)
	}
	return nil
}

// String returns the JSON text ("" for no meta).
func (m Meta) String() string { return string(m) }

// MarshalJSON returns the stored JSON ("null" when empty). encoding/json
// checks and compacts what it returns, so invalid meta fails the encoding of
// the request instead of reaching the server.
func (m Meta) MarshalJSON() ([]byte, error) {
	if len(m) == 0 {
		return []byte("null"), nil
	}
	return m, nil
}

// UnmarshalJSON stores a copy of the JSON value; null becomes no meta.
func (m *Meta) UnmarshalJSON(b []byte) error {
	if m == nil {
		return errors.New("webhook: UnmarshalJSON on a nil *Meta")
	}
	if string(b) == "null" {
		*m = nil
		return nil
	}
	*m = append((*m)[:0], b...)
	return nil
}
