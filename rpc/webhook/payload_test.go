package webhook

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
)

func TestAppendJSON(t *testing.T) {
	tests := []struct {
		name string
		p    Payload
		want string
	}{
		{
			name: "with meta",
			p:    Payload{ID: "user-reminder-123", Collection: "notifications", TriggerTime: 1767225600000, Attempt: 1, Meta: json.RawMessage(`{"any":"json"}`)},
			want: `{"id":"user-reminder-123","collection":"notifications","trigger_time":1767225600000,"attempt":1,"meta":{"any":"json"}}`,
		},
		{
			name: "nil meta is sent as {}",
			p:    Payload{ID: "a", Collection: "default", TriggerTime: 5, Attempt: 2},
			want: `{"id":"a","collection":"default","trigger_time":5,"attempt":2,"meta":{}}`,
		},
		{
			name: "empty meta is sent as {}",
			p:    Payload{ID: "a", Collection: "default", TriggerTime: 5, Attempt: 2, Meta: json.RawMessage{}},
			want: `{"id":"a","collection":"default","trigger_time":5,"attempt":2,"meta":{}}`,
		},
		{
			name: "stored null meta is sent as null",
			p:    Payload{ID: "a", Collection: "c", Attempt: 1, Meta: json.RawMessage(`null`)},
			want: `{"id":"a","collection":"c","trigger_time":0,"attempt":1,"meta":null}`,
		},
		{
			name: "escaping",
			p:    Payload{ID: "q\"b\\s/\n\r\t\x00\x1f\x7f", Collection: "é\u2028\u2029\xff", TriggerTime: math.MinInt64, Attempt: -1},
			want: `{"id":"q\"b\\s/\n\r\t\u0000\u001f` + "\x7f" + `","collection":"é\u2028\u2029\ufffd","trigger_time":-9223372036854775808,"attempt":-1,"meta":{}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := string(tt.p.AppendJSON([]byte("prefix")))
			if got != "prefix"+tt.want {
				t.Fatalf("AppendJSON =\n  %s\nwant\n  %s", got, "prefix"+tt.want)
			}
			if !json.Valid([]byte(tt.want)) {
				t.Fatalf("output is not valid JSON")
			}
		})
	}
}

// AppendJSON runs once per fired job; with a reused buffer it must not allocate.
func TestAppendJSONDoesNotAllocate(t *testing.T) {
	p := Payload{ID: "user-reminder-123", Collection: "notifications", TriggerTime: 1767225600000, Attempt: 3, Meta: json.RawMessage(`{"k":"v"}`)}
	buf := make([]byte, 0, 512)
	if n := testing.AllocsPerRun(100, func() { buf = p.AppendJSON(buf[:0]) }); n != 0 {
		t.Fatalf("AppendJSON allocated %v times per run", n)
	}
}

func FuzzPayloadAppendJSON(f *testing.F) {
	f.Add("user-reminder-123", "notifications", int64(1767225600000), 1, []byte(`{"any":"json"}`))
	f.Add("", "", int64(0), 0, []byte(nil))
	f.Add("q\"\\\n\x00\u2028", "\xff\xfe", int64(math.MinInt64), math.MaxInt, []byte(` [1, "two", {"3": null}] `))
	f.Add("日本語", "c", int64(-1), -5, []byte(`"just a string"`))
	f.Add("a", "b", int64(1), 1, []byte(`not json`))
	f.Fuzz(func(t *testing.T, id, collection string, triggerTime int64, attempt int, meta []byte) {
		// Meta is stored already validated; invalid meta is outside
		// AppendJSON's contract, so it is dropped rather than tested.
		if !json.Valid(meta) {
			meta = nil
		}
		p := Payload{ID: id, Collection: collection, TriggerTime: triggerTime, Attempt: attempt, Meta: meta}
		out := p.AppendJSON([]byte("xx"))
		if !bytes.HasPrefix(out, []byte("xx")) {
			t.Fatalf("AppendJSON clobbered dst")
		}
		out = out[2:]
		if !json.Valid(out) {
			t.Fatalf("invalid JSON: %q", out)
		}

		var got struct {
			ID          *string         `json:"id"`
			Collection  *string         `json:"collection"`
			TriggerTime *int64          `json:"trigger_time"`
			Attempt     *int            `json:"attempt"`
			Meta        json.RawMessage `json:"meta"`
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("Unmarshal(%q): %v", out, err)
		}
		// Strings must read back exactly as encoding/json would deliver them
		// (which replaces invalid UTF-8 with U+FFFD).
		if got.ID == nil || *got.ID != viaEncodingJSON(t, id) {
			t.Fatalf("id: got %q, want %q", deref(got.ID), viaEncodingJSON(t, id))
		}
		if got.Collection == nil || *got.Collection != viaEncodingJSON(t, collection) {
			t.Fatalf("collection: got %q, want %q", deref(got.Collection), viaEncodingJSON(t, collection))
		}
		if got.TriggerTime == nil || *got.TriggerTime != triggerTime {
			t.Fatalf("trigger_time: got %v, want %d", got.TriggerTime, triggerTime)
		}
		if got.Attempt == nil || *got.Attempt != attempt {
			t.Fatalf("attempt: got %v, want %d", got.Attempt, attempt)
		}

		var fields map[string]json.RawMessage
		if err := json.Unmarshal(out, &fields); err != nil {
			t.Fatal(err)
		}
		if len(meta) == 0 {
			if string(fields["meta"]) != "{}" {
				t.Fatalf("meta not sent as {} although none is stored: %s", out)
			}
			meta = []byte("{}")
		}
		if len(fields) != 5 {
			t.Fatalf("want 5 fields, got %d: %s", len(fields), out)
		}
		if !bytes.Equal(compact(t, got.Meta), compact(t, meta)) {
			t.Fatalf("meta: got %s, want %s", got.Meta, meta)
		}
	})
}

func viaEncodingJSON(t *testing.T, s string) string {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var out string
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func compact(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		t.Fatalf("compact %q: %v", b, err)
	}
	return buf.Bytes()
}

func deref(s *string) string {
	if s == nil {
		return "<missing>"
	}
	return *s
}

func BenchmarkAppendJSON(b *testing.B) {
	p := Payload{ID: "user-reminder-123", Collection: "notifications", TriggerTime: 1767225600000, Attempt: 1, Meta: json.RawMessage(`{"user":42,"kind":"reminder","text":"don't forget"}`)}
	buf := make([]byte, 0, 512)
	b.ReportAllocs()
	for b.Loop() {
		buf = p.AppendJSON(buf[:0])
	}
	b.SetBytes(int64(len(buf)))
}

func TestPayloadSchedule(t *testing.T) {
	p := Payload{ID: "daily@1767225600000", Collection: "c", TriggerTime: 1767225600000, Attempt: 1, Schedule: "daily"}
	got := string(p.AppendJSON(nil))
	want := `{"id":"daily@1767225600000","collection":"c","trigger_time":1767225600000,"attempt":1,"meta":{},"schedule":"daily"}`
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}
