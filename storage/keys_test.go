package storage

import (
	"bytes"
	"math"
	"sort"
	"testing"
)

func TestTimeEncodingOrders(t *testing.T) {
	times := []int64{math.MinInt64, -5, -1, 0, 1, 2, 1767225600000, math.MaxInt64}
	for i := 1; i < len(times); i++ {
		a, b := EncodeTime(nil, times[i-1]), EncodeTime(nil, times[i])
		if bytes.Compare(a, b) >= 0 {
			t.Errorf("EncodeTime(%d) >= EncodeTime(%d)", times[i-1], times[i])
		}
		if got := DecodeTime(b); got != times[i] {
			t.Errorf("round trip %d -> %d", times[i], got)
		}
	}
}

// Within one due time, keys order by the length-prefixed collection (so a
// shorter name first) and then the id; only the time order matters.
func TestDueKeysSortByTimeThenCollectionThenID(t *testing.T) {
	type e struct {
		due      int64
		coll, id string
	}
	in := []e{{5, "b", "a"}, {5, "a", "z"}, {3, "zz", "a"}, {5, "a", "a"}, {10, "a", "a"}, {5, "ab", "a"}}
	keys := make([][]byte, len(in))
	for i, x := range in {
		keys[i] = DueKey(nil, 7, x.due, x.coll, x.id)
	}
	sort.Slice(keys, func(i, j int) bool { return bytes.Compare(keys[i], keys[j]) < 0 })
	var got []e
	for _, k := range keys {
		d, err := DecodeDueKey(k)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, e{d.Due, d.Coll, d.ID})
	}
	want := []e{{3, "zz", "a"}, {5, "a", "a"}, {5, "a", "z"}, {5, "b", "a"}, {5, "ab", "a"}, {10, "a", "a"}}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("order %v, want %v", got, want)
		}
	}
}

func TestSpansAreDisjointAndContainTheirKeys(t *testing.T) {
	for _, slot := range []int{0, 1, 255, 256, MaxSlots - 1} {
		lo, hi := SlotSpan(slot)
		for _, k := range [][]byte{
			MetaKey(slot, MetaApplied),
			RecordKey(nil, slot, "c", "id"),
			DueKey(nil, slot, 42, "c", "id"),
			ListKey(nil, slot, "c", 42, "id"),
			FinishedKey(nil, slot, "c", 42, "id"),
		} {
			if bytes.Compare(k, lo) < 0 || bytes.Compare(k, hi) >= 0 {
				t.Errorf("slot %d key %x outside its span [%x,%x)", slot, k, lo, hi)
			}
		}
		if slot+1 < MaxSlots {
			lo2, _ := SlotSpan(slot + 1)
			if !bytes.Equal(hi, lo2) {
				t.Errorf("slot %d span end %x != next start %x", slot, hi, lo2)
			}
		}
	}
	// A collection's records never fall into a longer-named collection's span.
	lo, hi := CollectionRecordSpan(3, "ab")
	k := RecordKey(nil, 3, "abc", "x")
	if bytes.Compare(k, lo) >= 0 && bytes.Compare(k, hi) < 0 {
		t.Error("collection ab's span contains a key of collection abc")
	}
	if k := RecordKey(nil, 3, "ab", "zzz"); bytes.Compare(k, lo) < 0 || bytes.Compare(k, hi) >= 0 {
		t.Error("collection ab's span misses its own key")
	}
}

func TestFinishedBefore(t *testing.T) {
	lo, hi := FinishedBefore(1, "c", 100)
	in := FinishedKey(nil, 1, "c", 99, "zz")
	out := FinishedKey(nil, 1, "c", 100, "a")
	if bytes.Compare(in, lo) < 0 || bytes.Compare(in, hi) >= 0 {
		t.Error("finished at 99 not in [.., 100)")
	}
	if bytes.Compare(out, hi) < 0 {
		t.Error("finished at 100 in [.., 100)")
	}
}

func FuzzDecodeKeys(f *testing.F) {
	f.Add(DueKey(nil, 1, 5, "c", "i"))
	f.Add(RecordKey(nil, 1, "c", "i"))
	f.Add(ListKey(nil, 1, "c", 5, "i"))
	f.Add([]byte{1, 0, 0, 0x20, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		if e, err := DecodeDueKey(b); err == nil {
			if k := DueKey(nil, int(b[1])<<8|int(b[2]), e.Due, e.Coll, e.ID); !bytes.Equal(k, b) {
				t.Fatalf("due key round trip: %x -> %x", b, k)
			}
		}
		if s, c, id, err := DecodeRecordKey(b); err == nil {
			if k := RecordKey(nil, s, c, id); !bytes.Equal(k, b) {
				t.Fatalf("record key round trip: %x -> %x", b, k)
			}
		}
		_, _, _, _ = DecodeListKey(b)
		_, _, _, _ = DecodeFinishedKey(b)
	})
}

func TestScheduleKeys(t *testing.T) {
	k := ScheduleKey(nil, 7, "c", "daily")
	coll, id, err := DecodeScheduleKey(k)
	if err != nil || coll != "c" || id != "daily" {
		t.Fatalf("got %q %q %v", coll, id, err)
	}
	lo, hi := ScheduleSpan(7)
	if bytes.Compare(k, lo) < 0 || bytes.Compare(k, hi) >= 0 {
		t.Fatal("schedule key outside its span")
	}
	d := SchedDueKey(nil, 7, 1234, "c", "daily")
	e, err := DecodeSchedDueKey(d)
	if err != nil || e.Due != 1234 || e.Coll != "c" || e.ID != "daily" {
		t.Fatalf("got %+v %v", e, err)
	}
	if bytes.Compare(SchedDueBound(7, 1234), d) > 0 || bytes.Compare(SchedDueBound(7, 1235), d) <= 0 {
		t.Fatal("bounds do not order the entry")
	}
	lo, hi = SchedDueSpan(7)
	slo, shi := SlotSpan(7)
	if bytes.Compare(lo, slo) < 0 || bytes.Compare(hi, shi) > 0 {
		t.Fatal("schedule due span outside the slot span")
	}
}
