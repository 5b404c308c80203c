package raftfsm

import (
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/timemachine-db/timemachine/model"
)

// grow repeats s n times (at most 20,000 bytes), so the fuzzer reaches
// lengths around and beyond every limit from short seeds.
func grow(s string, n uint16) string {
	if s == "" || n <= 1 {
		return s
	}
	k := min(int(n), 20000/len(s)+1)
	return strings.Repeat(s, k)
}

// Every route validation accepts round-trips through the codec: a committed
// entry that does not decode fails on every replica (the 4,097–8,192-byte
// header value once passed validation, not the codec).
func FuzzAcceptedRouteRoundTrips(f *testing.F) {
	f.Add("billing", "https://example.com/hook", "X-Team", "v", uint16(8192), "whsec_"+strings.Repeat("A", 32), uint16(1))
	f.Add("r", "http://127.0.0.1:9/", "Authorization", "Bearer x", uint16(4097), "", uint16(300))
	f.Add("r", "http://h/", strings.Repeat("h", 256), "vv", uint16(8193), "", uint16(1))
	f.Fuzz(func(t *testing.T, name, url, hname, hval string, k uint16, secret string, urlRep uint16) {
		url = url + grow("p", urlRep)
		h := map[string]string{hname: grow(hval, k)}
		if model.CheckName("route", name) != nil || model.CheckURL("webhook_url", url) != nil ||
			model.CheckHeaders(h) != nil || (secret != "" && model.CheckSecret("signing_secret", secret) != nil) {
			return
		}
		c := &PutRoute{R: model.Route{Name: name, WebhookURL: url, Headers: h, SigningSecret: secret}, Now: 1}
		got, err := Decode(Encode(c))
		if err != nil {
			t.Fatalf("an accepted route does not decode: %v", err)
		}
		if !reflect.DeepEqual(got[0], Command(c)) {
			t.Fatal("an accepted route changed in a round trip")
		}
	})
}

// Every job validation accepts round-trips through the codec, and so does
// the longest last_error a leader writes.
func FuzzAcceptedJobRoundTrips(f *testing.F) {
	f.Add("c", "id-1", "https://example.com/hook", uint16(1), "e", uint16(2048), int64(1))
	f.Add(strings.Repeat("c", 64), strings.Repeat("i", 255), "http://h/", uint16(3000), "x", uint16(1), int64(model.MaxTriggerMs-1))
	f.Fuzz(func(t *testing.T, coll, id, url string, urlRep uint16, lastErr string, errRep uint16, trigger int64) {
		url = url + grow("p", urlRep)
		if model.CheckName("collection", coll) != nil || model.CheckID(id) != nil || model.CheckURL("callback_url", url) != nil ||
			trigger < 0 || trigger >= model.MaxTriggerMs {
			return
		}
		lastErr = grow(lastErr, errRep)
		if len(lastErr) > model.MaxLastErrorLen {
			lastErr = lastErr[:model.MaxLastErrorLen]
		}
		spec := model.JobSpec{TriggerTime: trigger, CallbackURL: url, Hash: 7}
		for _, c := range []Command{
			&Create{Coll: coll, ID: id, Spec: spec, Now: 1},
			&Upsert{Coll: coll, ID: id, Spec: spec, IfMatch: 3, Now: 2},
			&Delete{Coll: coll, ID: id},
			&Ack{Coll: coll, ID: id, Version: 1, Attempts: 2, LastError: lastErr, Now: 3},
		} {
			got, err := Decode(Encode(c))
			if err != nil {
				t.Fatalf("%T accepted by validation does not decode: %v", c, err)
			}
			if !reflect.DeepEqual(got[0], c) {
				t.Fatalf("%T changed in a round trip", c)
			}
		}
	})
}

// An entry no replica can decode is answered with an error and skipped:
// the entries after it apply, on the slot and on the meta state machine.
func TestUndecodableEntryDoesNotWedge(t *testing.T) {
	bad := append(Encode(&Delete{Coll: "c", ID: "x"}), 0xff, 0xff, 0xff)
	if _, err := Decode(bad); err == nil {
		t.Fatal("the test's bad entry decodes")
	}
	db := memDB(t)
	f := openFSM(t, db, 1)
	logs := []*raft.Log{
		{Index: 1, Term: 1, Type: raft.LogCommand, Data: Encode(&Create{Coll: "c", ID: "a", Spec: spec(100, 1), Now: 1})},
		{Index: 2, Term: 1, Type: raft.LogCommand, Data: bad},
		{Index: 3, Term: 1, Type: raft.LogCommand, Data: Encode(&Create{Coll: "c", ID: "b", Spec: spec(100, 2), Now: 1})},
	}
	out := f.ApplyBatch(logs)
	if _, isErr := out[1].(error); !isErr {
		t.Fatalf("the undecodable entry answered %T", out[1])
	}
	if r := results(t, out[2]); r[0].Code != model.CodeCreated {
		t.Fatalf("the entry after it: %v", r[0].Code)
	}
	if f.Applied() != 3 {
		t.Fatalf("applied = %d, want 3", f.Applied())
	}
	if _, ok, _ := GetJob(db, 1, "c", "b"); !ok {
		t.Fatal("the job after the bad entry is missing")
	}

	m := NewMetaFSM()
	if _, isErr := m.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: bad}).(error); !isErr {
		t.Fatal("meta: the undecodable entry was not answered with an error")
	}
	applyMeta(t, m, 2, &PutCollection{C: model.Collection{Name: "c2"}, Now: 1})
	if st := m.State(); st.Index != 2 || !hasCollection(st, "c2") {
		t.Fatalf("meta after the bad entry: index %d, collections %v", st.Index, st.Collections)
	}
}

func hasCollection(st *MetaState, name string) bool {
	_, ok := st.Collections.Get(name)
	return ok
}

// default always exists (API.md §2): its first PUT answers 200, as a
// replacement, while any other collection's first PUT creates it.
func TestPutCollectionDefaultIsAReplacement(t *testing.T) {
	m := NewMetaFSM()
	for i, tc := range []struct {
		name string
		want model.Code
	}{
		{model.DefaultCollection, model.CodeOK},
		{model.DefaultCollection, model.CodeOK},
		{"c1", model.CodeCreated},
		{"c1", model.CodeOK},
	} {
		r := applyMeta(t, m, uint64(i+1), &PutCollection{C: model.Collection{Name: tc.name, RetentionMs: 1000}, Now: int64(i + 1)})
		if r[0].Code != tc.want {
			t.Fatalf("PUT %d of %q: code %v, want %v", i, tc.name, r[0].Code, tc.want)
		}
	}
	if c, ok := m.State().Collection(model.DefaultCollection); !ok || c.RetentionMs != 1000 {
		t.Fatalf("default after its PUT: %+v %v", c, ok)
	}
}
