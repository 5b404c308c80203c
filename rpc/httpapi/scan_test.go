package httpapi

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

var scanSeeds = []string{
	`{}`, `[]`, `{"a":1}`, ` {"a" : [1, 2.5e-3, -0, true, false, null, "x\u00e9\n"], "b":{"c":{}}} `,
	`{"a":1,"a":2}`, `{"k\u0041y":"v"}`, `[1,]`, `{"a":}`, `{"a" 1}`, `01`, `-`, `1.`, `1e`, `1e+`,
	`"\x"`, "\"\x01\"", "\"\xff\"", `tru`, `nulll`, `[1] [2]`, `{"a":1}}`, `"\ud800"`, `[[[[]]]]`,
	`{"id":"a","trigger_time":1767225600000,"callback_url":"https://x/h","meta":{"n":[1,{"m":null}]}}`,
}

func TestScannerAgreesWithEncodingJSON(t *testing.T) {
	for _, s := range scanSeeds {
		checkScan(t, []byte(s))
	}
	deep := strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth)
	if err := validJSON([]byte(deep)); err != nil {
		t.Fatalf("depth %d: %v", maxDepth, err)
	}
	if err := validJSON([]byte("[" + deep + "]")); err == nil {
		t.Fatal("depth beyond the limit accepted")
	}
}

func FuzzScanner(f *testing.F) {
	for _, s := range scanSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(checkScan)
}

// checkScan: the scanner accepts exactly what encoding/json accepts (minus
// invalid UTF-8, which it refuses), and splits objects into the same
// members.
func checkScan(t *testing.T, b []byte) {
	err := validJSON(b)
	want := json.Valid(b) && utf8.Valid(b) && nesting(b) <= maxDepth
	if (err == nil) != want {
		t.Fatalf("%q: scanner says %v, encoding/json valid=%v utf8=%v", b, err, json.Valid(b), utf8.Valid(b))
	}
	if err != nil {
		return
	}
	trimmed := bytes.TrimSpace(b)
	switch trimmed[0] {
	case '{':
		o, err := parseObject(b)
		if err != nil {
			t.Fatalf("%q: parseObject: %v", b, err)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, mb := range o {
			seen[mb.key] = true
		}
		if len(seen) != len(m) {
			t.Fatalf("%q: %d distinct members, encoding/json %d", b, len(seen), len(m))
		}
		for k, v := range m {
			raw, ok := o.get(k)
			var std bytes.Buffer
			if err := json.Compact(&std, v); err != nil {
				t.Fatal(err)
			}
			if !ok || !bytes.Equal(compact(raw), std.Bytes()) {
				t.Fatalf("%q: member %q = %q, encoding/json %q", b, k, raw, v)
			}
		}
	case '[':
		items, err := parseBatch(b)
		if err != nil {
			t.Fatalf("%q: parseBatch: %v", b, err)
		}
		var want []json.RawMessage
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatal(err)
		}
		if len(items) != len(want) {
			t.Fatalf("%q: %d items, encoding/json %d", b, len(items), len(want))
		}
		for i, it := range items {
			if !bytes.Equal(compact(it.raw), compact(want[i])) || it.isObj != (want[i][0] == '{') {
				t.Fatalf("%q: item %d = %q, encoding/json %q", b, i, it.raw, want[i])
			}
			if it.isObj {
				o, err := parseObject(it.raw)
				if err != nil || len(o) != len(it.obj) {
					t.Fatalf("%q: item %d members %v vs %v (%v)", b, i, it.obj, o, err)
				}
				for k := range o {
					if o[k].key != it.obj[k].key || !bytes.Equal(o[k].raw, it.obj[k].raw) {
						t.Fatalf("%q: item %d member %d differs", b, i, k)
					}
				}
			}
		}
	default:
		if _, err := parseObject(b); err == nil {
			t.Fatalf("%q: parseObject accepted a non-object", b)
		}
	}
}

// nesting is the deepest nesting of arrays and objects in b (valid JSON).
func nesting(b []byte) int {
	depth, deepest, inStr := 0, 0, false
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case inStr && c == '\\':
			i++
		case c == '"':
			inStr = !inStr
		case inStr:
		case c == '[' || c == '{':
			depth++
			deepest = max(deepest, depth)
		case c == ']' || c == '}':
			depth--
		}
	}
	return deepest
}
