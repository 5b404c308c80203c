package dht

import "github.com/cespare/xxhash/v2"

// DefaultSlots is the default slot count: 12 = lcm(3, 4), so slots spread
// evenly over 1, 2, 3, 4, 6 or 12 nodes.
const DefaultSlots = 12

// SlotOf is the slot of a job (docs/architecture.md#slots):
// xxhash64(collection + "/" + id) % slots.
func SlotOf(collection, id string, slots int) int {
	d := xxhash.New()
	_, _ = d.WriteString(collection)
	_, _ = d.WriteString("/")
	_, _ = d.WriteString(id)
	return int(d.Sum64() % uint64(slots))
}
