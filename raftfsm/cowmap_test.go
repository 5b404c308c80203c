package raftfsm

import (
	"encoding/json"
	"fmt"
	"testing"
)

// Versions forked from one another never see each other's writes, and a
// map round-trips through JSON as a plain object (the snapshot format).
func TestShardedMapVersions(t *testing.T) {
	var v0 ShardedMap[int]
	for i := 0; i < 1000; i++ {
		v0.Set(fmt.Sprint("k", i), i)
	}
	v1 := v0.fork()
	v1.Set("k1", -1)
	v1.Set("new", 7)
	v1.Delete("k2")
	v1.Delete("absent")
	v2 := v1.fork()
	v2.Set("k1", -2)
	for _, c := range []struct {
		m    *ShardedMap[int]
		k    string
		want int
		ok   bool
	}{
		{&v0, "k1", 1, true}, {&v0, "k2", 2, true}, {&v0, "new", 0, false},
		{&v1, "k1", -1, true}, {&v1, "k2", 0, false}, {&v1, "new", 7, true},
		{&v2, "k1", -2, true}, {&v2, "k999", 999, true},
	} {
		if got, ok := c.m.Get(c.k); got != c.want || ok != c.ok {
			t.Errorf("Get(%s) = %d %v, want %d %v", c.k, got, ok, c.want, c.ok)
		}
	}
	if v0.Len() != 1000 || v1.Len() != 1000 || v2.Len() != 1000 {
		t.Fatalf("lens %d %d %d", v0.Len(), v1.Len(), v2.Len())
	}
	b, err := json.Marshal(v1)
	if err != nil {
		t.Fatal(err)
	}
	var plain map[string]int
	if err := json.Unmarshal(b, &plain); err != nil || len(plain) != 1000 || plain["new"] != 7 {
		t.Fatalf("not a plain object: %v (%d entries)", err, len(plain))
	}
	var back ShardedMap[int]
	if err := json.Unmarshal(b, &back); err != nil || back.Len() != 1000 {
		t.Fatal(err, back.Len())
	}
	n := 0
	back.Range(func(k string, v int) bool {
		if plain[k] != v {
			t.Errorf("%s: %d != %d", k, v, plain[k])
		}
		n++
		return true
	})
	if n != 1000 {
		t.Fatalf("Range visited %d", n)
	}
	var empty ShardedMap[int]
	if err := json.Unmarshal([]byte("null"), &empty); err != nil || empty.Len() != 0 {
		t.Fatal(err)
	}
}
