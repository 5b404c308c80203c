package slot

import (
	"container/heap"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/timemachine-db/timemachine/storage"
)

// TestPendingHeapOrder: the typed push and pop hand jobs out in trigger
// order (due, collection, id), with positions kept for heap.Init and
// forget, interleaved as a lane uses them.
func TestPendingHeapOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var q pendingHeap
	var last *storage.DueEntry
	mk := func() *pending {
		e := storage.DueEntry{Due: rng.Int64N(50), Coll: string(rune('a' + rng.IntN(3))), ID: string(rune('a' + rng.IntN(26)))}
		return &pending{e: e, it: &item{e: e}}
	}
	check := func() {
		for i, p := range q {
			if p.idx != i {
				t.Fatalf("position %d holds idx %d", i, p.idx)
			}
		}
	}
	for round := 0; round < 200; round++ {
		for range rng.IntN(20) {
			q.push(mk())
		}
		check()
		last = nil
		for range rng.IntN(len(q) + 1) {
			p := q.pop()
			if p.idx != -1 {
				t.Fatalf("popped job keeps idx %d", p.idx)
			}
			e := p.it.e
			if last != nil && (e.Due < last.Due || e.Due == last.Due && (e.Coll < last.Coll || e.Coll == last.Coll && e.ID < last.ID)) {
				t.Fatalf("popped %+v after %+v", e, *last)
			}
			last = &e
		}
		check()
		if round%50 == 0 { // forget rebuilds with container/heap
			heap.Init(&q)
			check()
		}
	}
}

// BenchmarkPendingHeap is a batched lane's queue in steady state: 20,000
// jobs waiting (a second of a slot's window at 100,000 jobs/s over 12
// slots, loaded across the node), one push and one pop per job; due times
// in milliseconds, so that many jobs tie and the order falls to the ids.
func BenchmarkPendingHeap(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	const depth = 20000
	mk := func(n int) *pending {
		e := storage.DueEntry{Due: int64(n / 100), Coll: "bench", ID: "b4c2a19e0d7f3-" + strconv.Itoa(rng.IntN(1<<30))}
		return &pending{e: e, it: &item{e: e}}
	}
	var q pendingHeap
	for i := range depth {
		q.push(mk(i))
	}
	b.ResetTimer()
	for i := range b.N {
		q.push(mk(depth + i))
		q.pop()
	}
}
