package raftfsm

import (
	"reflect"
	"slices"
	"testing"

	"github.com/timemachine-db/timemachine/model"
)

func sampleCommands() []Command {
	spec := model.JobSpec{TriggerTime: 1767225600000, CallbackURL: "https://example.com/hook", Meta: []byte(`{"a":1}`),
		Retry: model.RetryPolicy{MaxAttempts: 3, InitialIntervalMs: 500, Multiplier: 1.5}, CallbackTimeoutMs: 2500, Hash: 0xdeadbeef}
	return []Command{
		&Create{Coll: "default", ID: "a", Spec: spec, Now: 42},
		&Create{Coll: "c", ID: "no-meta", Spec: model.JobSpec{TriggerTime: -5, Route: "billing"}, Now: 1},
		&Upsert{Coll: "c", ID: "b", Spec: spec, IfMatch: 7, Now: 43},
		&Delete{Coll: "c", ID: "d"},
		&DeleteIncarnation{Coll: "c", ID: "d2", CreatedAt: 1767225600123456789},
		&DropTombstones{Before: 1767225600000},
		&Ack{Coll: "c", ID: "e", Version: 3, Success: true, Attempts: 1, Now: 44},
		&Ack{Coll: "c", ID: "f", Version: 4, Attempts: 5, LastError: "callback answered 500", Now: 45},
		&AckMany{Coll: "c", Now: 45, Jobs: []AckJob{{ID: "e", Version: 3, Success: true, Attempts: 1}, {ID: "f", Version: 4, Attempts: 5, LastError: "callback answered 500"}}},
		&Retry{Coll: "c", ID: "g", Version: 2, NextDue: 99, Attempts: 2, LastError: "timeout", Now: 46},
		&Reschedule{Coll: "c", ID: "h", Version: 9, TriggerTime: 1000, Now: 47},
		&AdvanceOffset{Offset: 123456},
		&DropDue{Due: 5, Coll: "c", ID: "i"},
		&RemoveFinished{Coll: "c", Before: 77, Limit: 2000},
		&PurgeCollection{Coll: "c", Limit: 5000},
		&PurgeCollection{Coll: "c", Limit: 5000, Fence: 8},
		&Create{Coll: "c", ID: "inc", Spec: spec, Now: 42, CollInc: 7},
		&Upsert{Coll: "c", ID: "inc", Spec: spec, Now: 43, CollInc: 7},
		&Upsert{Coll: "c", ID: "inc", Spec: spec, IfMatch: 2, Now: 43, CollInc: 7},
		&PutCollection{C: model.Collection{Name: "c", Retry: model.RetryPolicy{MaxAttempts: 2}, CallbackTimeoutMs: 1, RetentionMs: 2, SigningSecret: "whsec_x", CreatedAt: 3, UpdatedAt: 4}, Now: 48},
		&MarkCollectionDeleting{Name: "c", Now: 49},
		&ForgetCollection{Name: "c"},
		&PutRoute{R: model.Route{Name: "r", WebhookURL: "http://x", Headers: map[string]string{"A": "1", "B": "2"}, SigningSecret: "s", TimeoutMs: 5}, Now: 50},
		&PutRoute{R: model.Route{Name: "paced", WebhookURL: "http://y", TimeoutMs: 5, RateLimit: model.RateLimit{PerSecond: 0.5, Burst: 3},
			MaxInFlight: 7, Batch: model.BatchPolicy{MaxJobs: 100, MaxWaitMs: 20}}, Now: 51},
		&PutRoute{R: model.Route{Name: "batch-only", WebhookURL: "http://z", Batch: model.BatchPolicy{MaxJobs: 1}}, Now: 52},
		&PutRoute{R: model.Route{Name: "pipelined", WebhookURL: "http://p", TimeoutMs: 5, Pipeline: true}, Now: 53},
		&PutRoute{R: model.Route{Name: "paced-pipelined", WebhookURL: "http://q", MaxInFlight: 4, Pipeline: true}, Now: 54},
		&DeleteRoute{Name: "r"},
		&InitCluster{SlotCount: 2, ReplicationFactor: 3, Nodes: []model.Node{{ID: "n1", HTTPAddr: "h", BindAddr: "b", SerfAddr: "s", Status: model.NodeAlive, Since: 1, JoinedAt: 2}},
			Slots: []model.SlotEntry{{Replicas: []string{"n1", "n2"}, Epoch: 1}, {Replicas: []string{"n2"}, Epoch: 1}}, Now: 9},
		&UpsertNode{N: model.Node{ID: "n2", Status: model.NodeFailed}, Now: 10},
		&SetSlots{Updates: []SlotUpdate{{Slot: 1, Replicas: []string{"n3", "n1"}, ExpectEpoch: 4}}},
		&RemoveNode{ID: "n2"},
		&SetReplicationFactor{RF: 3},
		&SetPreferredLeaders{Updates: []PreferredUpdate{{Slot: 3, Node: "n2"}, {Slot: 4, Node: ""}}},
		&ForgetNode{ID: "n4", At: 1700000000000, StartedAt: 1690000000000},
	}
}

func TestCodecRoundTrip(t *testing.T) {
	cmds := sampleCommands()
	for _, c := range cmds {
		got, err := Decode(Encode(c))
		if err != nil {
			t.Fatalf("%T: %v", c, err)
		}
		if len(got) != 1 || !reflect.DeepEqual(got[0], c) {
			t.Fatalf("%T round trip:\n got %#v\nwant %#v", c, got[0], c)
		}
	}
	got, err := Decode(Encode(cmds...))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, cmds) {
		t.Fatal("batch round trip differs")
	}
	enc := make([][]byte, len(cmds))
	for i, c := range cmds {
		enc[i] = EncodeOne(c)
	}
	got, err = Decode(EncodeBatch(enc))
	if err != nil || !reflect.DeepEqual(got, cmds) {
		t.Fatalf("EncodeBatch round trip: %v", err)
	}
}

// TestPutRouteVersions: a route without delivery control keeps the
// original record (readable by older binaries); one with it uses
// CmdPutRouteV2.
func TestPutRouteVersions(t *testing.T) {
	plain := EncodeOne(&PutRoute{R: model.Route{Name: "r", WebhookURL: "http://x"}, Now: 1})
	if CmdType(plain[0]) != CmdPutRoute {
		t.Fatalf("plain route encoded as %d", plain[0])
	}
	paced := EncodeOne(&PutRoute{R: model.Route{Name: "r", WebhookURL: "http://x", MaxInFlight: 2}, Now: 1})
	if CmdType(paced[0]) != CmdPutRouteV2 {
		t.Fatalf("paced route encoded as %d", paced[0])
	}
	// A v2 record cut before its delivery fields is corrupt, not a v1 one.
	if _, err := Decode(paced[:len(plain)-1]); err == nil {
		t.Fatal("truncated v2 route decoded")
	}
}

// TestPutRoutePipeline: a pipelined route is written as CmdPutRouteV3,
// which a binary that predates it refuses as a newer command (it stops
// and asks for the newer binary rather than skip a route change); a route
// without the flag keeps the command and bytes older binaries write.
func TestPutRoutePipeline(t *testing.T) {
	for _, c := range []struct {
		name string
		r    model.Route
		typ  CmdType // without the flag
	}{
		{"plain", model.Route{Name: "r", WebhookURL: "http://x", TimeoutMs: 5}, CmdPutRoute},
		{"paced", model.Route{Name: "r", WebhookURL: "http://x", RateLimit: model.RateLimit{PerSecond: 3, Burst: 2}, MaxInFlight: 2,
			Batch: model.BatchPolicy{MaxJobs: 10, MaxWaitMs: 5}}, CmdPutRouteV2},
	} {
		without := EncodeOne(&PutRoute{R: c.r, Now: 1})
		on := c.r
		on.Pipeline = true
		with := EncodeOne(&PutRoute{R: on, Now: 1})
		if CmdType(without[0]) != c.typ || CmdType(with[0]) != CmdPutRouteV3 {
			t.Fatalf("%s: encoded as %d and %d, want %d and %d", c.name, without[0], with[0], c.typ, CmdPutRouteV3)
		}
		for _, tc := range []struct {
			what  string
			entry []byte
			want  bool
		}{
			{"with the flag", with, true},
			{"without", without, false},
			{"with the flag, in a batch", EncodeBatch([][]byte{with, EncodeOne(&DeleteRoute{Name: "z"})}), true},
		} {
			got, err := Decode(tc.entry)
			if err != nil {
				t.Fatalf("%s, %s: %v", c.name, tc.what, err)
			}
			pr, ok := got[0].(*PutRoute)
			if !ok {
				t.Fatalf("%s, %s: decoded %T", c.name, tc.what, got[0])
			}
			want := c.r
			want.Pipeline = tc.want
			if !reflect.DeepEqual(pr.R, want) || pr.Now != 1 {
				t.Fatalf("%s, %s: got %+v, want %+v", c.name, tc.what, pr.R, want)
			}
		}
		// Only the one flag exists: other flags are corrupt.
		bad := slices.Clone(with)
		i := len(bad) - 2 // the flags uvarint, before Now (varint 1 = one byte)
		if bad[i] != routePipelineFlag {
			t.Fatalf("%s: flags byte %d", c.name, bad[i])
		}
		bad[i] = 3
		if _, err := Decode(bad); err == nil {
			t.Fatalf("%s: %x decoded", c.name, bad)
		}
	}
}

func TestDecodeRejects(t *testing.T) {
	cases := map[string][]byte{
		"empty":           {},
		"unknown type":    {200, 1},
		"future version":  {byte(CmdDelete), 2, 0, 0},
		"truncated":       Encode(&Delete{Coll: "c", ID: "abc"})[:5],
		"trailing":        append(Encode(&Delete{Coll: "c", ID: "d"}), 0),
		"huge batch":      {byte(CmdBatch), 1, 0xff, 0xff, 0xff, 0xff, 0x0f},
		"huge string":     {byte(CmdDelete), 1, 0xff, 0xff, 0xff, 0xff, 0x0f},
		"batch bad inner": {byte(CmdBatch), 1, 1, 2, 200, 1},
	}
	for name, b := range cases {
		if _, err := Decode(b); err == nil {
			t.Errorf("%s: decoded without error", name)
		}
	}
}

func FuzzDecode(f *testing.F) {
	for _, c := range sampleCommands() {
		f.Add(Encode(c))
	}
	f.Add(Encode(sampleCommands()...))
	f.Fuzz(func(t *testing.T, b []byte) {
		cmds, err := Decode(b)
		if err != nil {
			return
		}
		// Whatever decodes re-encodes to something that decodes the same.
		again, err := Decode(Encode(cmds...))
		if err != nil {
			t.Fatalf("re-encoded commands do not decode: %v", err)
		}
		if len(cmds) > 0 && !reflect.DeepEqual(again, cmds) {
			t.Fatalf("re-encode changed the commands")
		}
	})
}

func TestRecordRoundTrip(t *testing.T) {
	jobs := []model.Job{
		{Version: 1, Status: model.StatusScheduled, TriggerTime: 100, DueTime: 100, CreatedAt: 50, UpdatedAt: 50, CallbackURL: "http://x", SpecHash: 9},
		{Version: 9, Status: model.StatusFailed, TriggerTime: 100, DueTime: 180, Attempts: 5, CreatedAt: 50, UpdatedAt: 200, FinishedAt: 200,
			Route: "r", Meta: []byte(`{}`), Retry: model.RetryPolicy{MaxAttempts: 5, Multiplier: 3}, CallbackTimeoutMs: 10, LastError: "boom", SpecHash: 1},
		{Version: 2, Status: model.StatusSucceeded, TriggerTime: -1, DueTime: -1, Meta: []byte{}},
	}
	for i, j := range jobs {
		var got model.Job
		if err := DecodeRecord(AppendRecord(nil, &j), &got); err != nil {
			t.Fatalf("job %d: %v", i, err)
		}
		if !reflect.DeepEqual(got, j) {
			t.Fatalf("job %d round trip:\n got %#v\nwant %#v", i, got, j)
		}
	}
}

func FuzzDecodeRecord(f *testing.F) {
	j := model.Job{Version: 1, Status: model.StatusScheduled, TriggerTime: 100, DueTime: 100, CallbackURL: "http://x", Meta: []byte(`{"a":1}`)}
	f.Add(AppendRecord(nil, &j))
	f.Fuzz(func(t *testing.T, b []byte) {
		var j model.Job
		if DecodeRecord(b, &j) != nil {
			return
		}
		var again model.Job
		if err := DecodeRecord(AppendRecord(nil, &j), &again); err != nil || !reflect.DeepEqual(again, j) {
			t.Fatalf("record re-encode: %v", err)
		}
	})
}

func TestResultsRoundTrip(t *testing.T) {
	res := []model.Result{
		{Code: model.CodeCreated, Job: &model.Job{Collection: "c", ID: "a", Version: 1, Status: model.StatusScheduled, TriggerTime: 5, DueTime: 5, CallbackURL: "http://x", Meta: []byte(`{}`)}},
		{Code: model.CodeStale},
		{Code: model.CodeOK, More: true, N: 42},
	}
	got, err := DecodeResults(EncodeResults(res))
	if err != nil || !reflect.DeepEqual(got, res) {
		t.Fatalf("round trip: %v\n got %+v\nwant %+v", err, got, res)
	}
	cmds := sampleCommands()
	enc := make([][]byte, len(cmds))
	for i, c := range cmds {
		enc[i] = EncodeOne(c)
	}
	parts, err := SplitBatch(EncodeBatch(enc))
	if err != nil || !reflect.DeepEqual(parts, enc) {
		t.Fatalf("SplitBatch: %v", err)
	}
}

func FuzzDecodeResults(f *testing.F) {
	f.Add(EncodeResults([]model.Result{{Code: model.CodeOK, Job: &model.Job{Collection: "c", ID: "i", Status: model.StatusFailed}}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = DecodeResults(b)
		_, _ = SplitBatch(b)
	})
}
