package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/timemachine-db/timemachine/model"
)

// object is a decoded JSON object: its members in order, by exact name,
// with undecoded values that alias the scanned body. Exact, case-sensitive
// names let every unknown field be reported by name, so a typo like
// "trigger_tme" is an error instead of a silently ignored field.
type object []member

// get returns the raw value of member name; the last of duplicate members
// wins (fieldSet.check refuses duplicates of the members it knows).
func (o object) get(name string) ([]byte, bool) {
	for i := len(o) - 1; i >= 0; i-- {
		if o[i].key == name {
			return o[i].raw, true
		}
	}
	return nil, false
}

// jsonKind names the JSON type of a raw value, for error messages.
func jsonKind(raw []byte) string {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// isNull reports whether raw is the JSON null. The API treats an explicit
// null like an absent field, which is what most JSON encoders emit for
// "unset".
func isNull(raw []byte) bool { return string(bytes.TrimSpace(raw)) == "null" }

// shown renders a raw JSON value for an error message, shortened so a huge
// value cannot blow up the answer.
func shown(raw []byte) string {
	raw = bytes.TrimSpace(raw)
	const max = 80
	if len(raw) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(raw[cut]) {
			cut--
		}
		return string(raw[:cut]) + "…"
	}
	return string(raw)
}

// syntaxError turns a scan error of a request body into a message that
// says where the problem is.
func syntaxError(what string, err *jsonError) *model.Error {
	return model.Invalid("%s is not valid JSON: %s", what, err.Error())
}

// decodeObject scans raw, which must be a JSON object. what names it in
// messages ("request body", "retry_policy").
func decodeObject(what string, raw []byte) (object, *model.Error) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 {
		return nil, model.Invalid("%s is empty; send a JSON object", what)
	}
	if trimmed[0] != '{' {
		if err := validJSON(trimmed); err != nil {
			return nil, syntaxError(what, err)
		}
		return nil, model.Invalid("%s must be a JSON object, got %s", what, jsonKind(trimmed))
	}
	o, err := parseObject(trimmed)
	if err != nil {
		return nil, syntaxError(what, err)
	}
	return o, nil
}

// unquote decodes a quoted JSON string that contains escapes (already
// validated by the scanner).
func unquote(q []byte) string {
	var s string
	if err := json.Unmarshal(q, &s); err != nil {
		return string(q[1 : len(q)-1])
	}
	return s
}

// fieldSet describes the members an object may have: the ones that are
// used and the read-only ones that are accepted and ignored (so a client can
// send back what it read).
type fieldSet struct {
	known   []string
	ignored []string
	all     map[string]bool
}

func newFieldSet(known, ignored []string) *fieldSet {
	fs := &fieldSet{known: known, ignored: ignored, all: map[string]bool{}}
	for _, k := range known {
		fs.all[k] = true
	}
	for _, k := range ignored {
		fs.all[k] = true
	}
	return fs
}

// check reports the first (in sorted order, so answers are deterministic)
// member of o that is not in the set, with a suggestion when the name is a
// likely typo of a known one.
func (fs *fieldSet) check(prefix string, o object) *model.Error {
	var unknown []string
	for i, m := range o {
		if !fs.all[m.key] {
			unknown = append(unknown, m.key)
		}
		// A member given twice is refused rather than read as the last
		// one (what encoding/json does): with two ids or two trigger
		// times, which one the client meant is a guess.
		for _, prev := range o[:i] {
			if prev.key == m.key && fs.all[m.key] {
				return model.Invalid("field %q appears twice in %s; give it once", prefix+m.key, fieldsWhere(prefix))
			}
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	sort.Strings(unknown)
	k := unknown[0]
	where := fieldsWhere(prefix)
	if s := suggest(k, fs.known); s != "" {
		return model.Invalid("unknown field %q in %s (did you mean %q?)", prefix+k, where, s)
	}
	return model.Invalid("unknown field %q in %s; the fields are: %s", prefix+k, where, strings.Join(fs.known, ", "))
}

// fieldsWhere names the object a fieldSet checks, for messages.
func fieldsWhere(prefix string) string {
	if prefix == "" {
		return "the request body"
	}
	return strings.TrimSuffix(prefix, ".")
}

// suggest returns the known name closest to k when it is close enough to
// be a typo (edit distance at most 2, or a case-only difference).
func suggest(k string, known []string) string {
	best, bestD := "", 3
	for _, c := range known {
		if strings.EqualFold(c, k) {
			return c
		}
		if d := editDistance(strings.ToLower(k), c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance; names are short.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 99
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// field returns member name of o, treating null as absent.
func (o object) field(name string) (json.RawMessage, bool) {
	raw, ok := o.get(name)
	if !ok || isNull(raw) {
		return nil, false
	}
	return raw, true
}

// str decodes a JSON string member.
func str(path string, raw []byte) (string, *model.Error) {
	if len(raw) == 0 || raw[0] != '"' {
		return "", model.Invalid("%s: must be a string, got %s %s", path, jsonKind(raw), shown(raw))
	}
	// Fast path: no escapes, so the text between the quotes is the string.
	if inner := raw[1 : len(raw)-1]; bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return string(inner), nil
	}
	return unquote(raw), nil
}

// integer decodes a JSON number member that must be a whole number in
// [lo, hi]. A whole number written with a fraction or an exponent
// (1893456000000.0, 1e3: what clients that compute in floating point send)
// is that number; any other fraction is refused rather than rounded.
func integer(path string, raw []byte, lo, hi int64) (int64, *model.Error) {
	if len(raw) == 0 || !(raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9')) {
		return 0, model.Invalid("%s: must be an integer, got %s %s", path, jsonKind(raw), shown(raw))
	}
	text := string(raw)
	if bytes.ContainsAny(raw, ".eE") {
		text = string(canonicalNumber(json.Number(text))) // exact: "1.0" → "1", "1.5" stays a fraction
	}
	n, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		var ne *strconv.NumError
		if errors.As(err, &ne) && errors.Is(ne.Err, strconv.ErrRange) {
			return 0, model.Invalid("%s: must be an integer from %d to %d, got %s", path, lo, hi, shown(raw))
		}
		return 0, model.Invalid("%s: must be a whole number (no fraction), got %s", path, shown(raw))
	}
	if n < lo || n > hi {
		return 0, model.Invalid("%s: must be an integer from %d to %d, got %d", path, lo, hi, n)
	}
	return n, nil
}

// number decodes a JSON number member in [lo, hi].
func number(path string, raw []byte, lo, hi float64) (float64, *model.Error) {
	if len(raw) == 0 || !(raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9')) {
		return 0, model.Invalid("%s: must be a number, got %s %s", path, jsonKind(raw), shown(raw))
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || f < lo || f > hi {
		return 0, model.Invalid("%s: must be a number from %g to %g, got %s", path, lo, hi, shown(raw))
	}
	return f, nil
}

// stringMap decodes a JSON object whose members are all strings.
func stringMap(path string, raw []byte) (map[string]string, *model.Error) {
	o, e := decodeObject(path, raw)
	if e != nil {
		return nil, e
	}
	m := make(map[string]string, len(o))
	for _, mb := range o {
		v, e := str(fmt.Sprintf("%s[%q]", path, mb.key), mb.raw)
		if e != nil {
			return nil, e
		}
		m[mb.key] = v // a duplicate name: the last wins, as in encoding/json
	}
	return m, nil
}
