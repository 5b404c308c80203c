package raftfsm

import (
	"fmt"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/timemachine-db/timemachine/model"
)

// BenchmarkMetaApplyAt20kCollections: one meta write (a collection PUT,
// and a node-table write such as the controller makes) with 20,000
// collections and 1,000 routes in the state: what a meta write costs
// because of the state's size.
func BenchmarkMetaApplyAt20kCollections(b *testing.B) {
	f := NewMetaFSM()
	var idx uint64
	apply := func(c Command) {
		idx++
		f.Apply(&raft.Log{Index: idx, Type: raft.LogCommand, Data: Encode(c)})
	}
	for i := 0; i < 20000; i++ {
		apply(&PutCollection{C: model.Collection{Name: fmt.Sprintf("c%05d", i)}, Now: 1})
	}
	for i := 0; i < 1000; i++ {
		apply(&PutRoute{R: model.Route{Name: fmt.Sprintf("r%04d", i), WebhookURL: "http://x/"}, Now: 1})
	}
	b.Run("put-collection", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			apply(&PutCollection{C: model.Collection{Name: "c00042", RetentionMs: int64(i + 1000)}, Now: 2})
		}
	})
	b.Run("put-route", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			apply(&PutRoute{R: model.Route{Name: "r0042", WebhookURL: fmt.Sprintf("http://x/%d", i)}, Now: 2})
		}
	})
}
