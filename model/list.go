package model

// ListPos is a position in a collection's (trigger_time, id) order.
type ListPos struct {
	Trigger int64
	ID      string
}

// Less orders positions.
func (p ListPos) Less(q ListPos) bool {
	return p.Trigger < q.Trigger || (p.Trigger == q.Trigger && p.ID < q.ID)
}

// ListQuery selects jobs of one collection by trigger time.
type ListQuery struct {
	Coll   string
	Status Status // 0: any
	// Schedule, when set, keeps only that schedule's occurrences (they
	// live in the schedule's slot).
	Schedule string
	From     int64    // trigger_time >= From
	To       int64    // trigger_time < To
	After    *ListPos // exclusive cursor
	Limit    int      // matching jobs to return
	Budget   int      // index entries to examine at most (0: 10 × Limit + 1000)
}

// ListPage is one slot's answer to a ListQuery.
type ListPage struct {
	Jobs []*Job
	// Stopped is set when the scan ended before the end of the range (the
	// limit or the budget was reached); Pos is then the last position
	// examined: everything up to it was considered.
	Stopped bool
	Pos     ListPos
}
