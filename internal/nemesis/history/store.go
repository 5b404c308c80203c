package history

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"sync"
)

// File names inside a run's output directory.
const (
	HistoryFile    = "history.jsonl"
	DeliveriesFile = "deliveries.jsonl"
)

// record is one line of history.jsonl; exactly one field besides Type is
// set.
type record struct {
	Type     string      `json:"type"`
	Meta     *Meta       `json:"meta,omitempty"`
	Op       *Op         `json:"op,omitempty"`       // invoke: the arguments
	Done     *doneRecord `json:"done,omitempty"`     // complete
	Fault    *Fault      `json:"fault,omitempty"`    // written at start and at end
	Failover *Failover   `json:"failover,omitempty"` // measured
	Cycle    *Cycle      `json:"cycle,omitempty"`    // finished
}

type doneRecord struct {
	ID int64 `json:"id"`
	Completion
}

// Recorder appends a run's events to its output directory. It is safe for
// concurrent use; every method after Close is a no-op.
type Recorder struct {
	Clock *Clock

	mu     sync.Mutex
	nextID int64
	hf, df *os.File
	hw, dw *bufio.Writer
	err    error
	closed bool
	// In memory too, for Snapshot.
	ops        map[int64]*Op
	deliveries []Delivery
	faults     map[int]Fault
	failovers  []Failover
	cycles     []Cycle
	meta       Meta
}

// NewRecorder makes dir and opens its history and deliveries files afresh.
func NewRecorder(dir string, clock *Clock) (*Recorder, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	hf, err := os.Create(filepath.Join(dir, HistoryFile))
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	df, err := os.Create(filepath.Join(dir, DeliveriesFile))
	if err != nil {
		hf.Close()
		return nil, fmt.Errorf("history: %w", err)
	}
	return &Recorder{Clock: clock, hf: hf, df: df,
		hw: bufio.NewWriterSize(hf, 1<<16), dw: bufio.NewWriterSize(df, 1<<16), ops: map[int64]*Op{}, faults: map[int]Fault{}}, nil
}

func (r *Recorder) write(w *bufio.Writer, v any) {
	if r.closed || r.err != nil {
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		r.err = fmt.Errorf("history: encode: %w", err)
		return
	}
	b = append(b, '\n')
	if _, err := w.Write(b); err != nil {
		r.err = fmt.Errorf("history: write: %w", err)
	}
}

// Meta writes the run's description (first, and again at the end when it
// changed).
func (r *Recorder) Meta(m Meta) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.meta = m
	r.write(r.hw, record{Type: "meta", Meta: &m})
}

// Invoke records an operation's invocation now and returns its id. The op's
// ID, Call, Ret and Outcome are set here.
func (r *Recorder) Invoke(op Op) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.nextID++
	op.ID = r.nextID
	op.Call = r.Clock.Now()
	op.Ret = Never
	op.Outcome = Unknown
	r.write(r.hw, record{Type: "invoke", Op: &op})
	r.ops[op.ID] = &op
	return op.ID
}

// Complete records the completion of operation id, stamped now.
func (r *Recorder) Complete(id int64, c Completion) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c.Ret = r.Clock.Now()
	if c.Outcome == Unknown {
		// An indeterminate operation may take effect at any time after
		// its call: its return is "never".
		c.Ret = Never
	}
	r.write(r.hw, record{Type: "complete", Done: &doneRecord{ID: id, Completion: c}})
	if op, ok := r.ops[id]; ok {
		op.apply(c)
	}
}

// Fault records a fault window (call it when it starts, with End = Never,
// and again when it ends).
func (r *Recorder) Fault(f Fault) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.faults[f.ID] = f
	r.write(r.hw, record{Type: "fault", Fault: &f})
}

// Failover records a failover measurement.
func (r *Recorder) Failover(f Failover) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failovers = append(r.failovers, f)
	r.write(r.hw, record{Type: "failover", Failover: &f})
}

// Cycle records a finished cycle.
func (r *Recorder) Cycle(c Cycle) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cycles = append(r.cycles, c)
	r.write(r.hw, record{Type: "cycle", Cycle: &c})
}

// Delivery appends one receiver log entry.
func (r *Recorder) Delivery(d Delivery) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.deliveries = append(r.deliveries, d)
	r.write(r.dw, d)
}

// Snapshot is the run so far, from memory (operations in flight have
// Ret = Never and Outcome Unknown).
func (r *Recorder) Snapshot() *History {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := &History{Meta: r.meta, Deliveries: append([]Delivery(nil), r.deliveries...),
		Failovers: append([]Failover(nil), r.failovers...), Cycles: append([]Cycle(nil), r.cycles...)}
	h.Ops = make([]Op, 0, len(r.ops))
	for id := int64(1); id <= r.nextID; id++ {
		if op, ok := r.ops[id]; ok {
			h.Ops = append(h.Ops, *op)
		}
	}
	for _, f := range r.faults {
		h.Faults = append(h.Faults, f)
	}
	sort.Slice(h.Faults, func(i, j int) bool { return h.Faults[i].ID < h.Faults[j].ID })
	return h
}

// Flush writes buffered records to the files.
func (r *Recorder) Flush() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return r.err
	}
	if err := r.hw.Flush(); err != nil && r.err == nil {
		r.err = err
	}
	if err := r.dw.Flush(); err != nil && r.err == nil {
		r.err = err
	}
	return r.err
}

// Close flushes and closes the files; it returns the first error any
// write met.
func (r *Recorder) Close() error {
	err := r.Flush()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return err
	}
	r.closed = true
	err = errors.Join(err, r.hf.Sync(), r.df.Sync(), r.hf.Close(), r.df.Close())
	return err
}

func (op *Op) apply(c Completion) {
	op.Ret, op.Outcome, op.Status, op.Code, op.Err = c.Ret, c.Outcome, c.Status, c.Code, c.Err
	op.Version, op.JobStatus, op.JobTrigger = c.Version, c.JobStatus, c.JobTrigger
	op.JobAttempts, op.JobLastError = c.JobAttempts, c.JobLastError
}

// Load reads a run back from dir.
func Load(dir string) (*History, error) {
	h := &History{}
	f, err := os.Open(filepath.Join(dir, HistoryFile))
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	defer f.Close()
	ops := map[int64]*Op{}
	var order []int64
	faults := map[int]Fault{}
	err = eachLine(f, func(line []byte) error {
		var rec record
		if err := json.Unmarshal(line, &rec); err != nil {
			return err
		}
		switch rec.Type {
		case "meta":
			if rec.Meta != nil {
				h.Meta = *rec.Meta
			}
		case "invoke":
			if rec.Op == nil {
				return errors.New("invoke without op")
			}
			op := *rec.Op
			op.Ret, op.Outcome = Never, Unknown
			ops[op.ID] = &op
			order = append(order, op.ID)
		case "complete":
			if rec.Done == nil {
				return errors.New("complete without done")
			}
			op, ok := ops[rec.Done.ID]
			if !ok {
				return fmt.Errorf("complete of unknown op %d", rec.Done.ID)
			}
			op.apply(rec.Done.Completion)
		case "fault":
			if rec.Fault != nil {
				faults[rec.Fault.ID] = *rec.Fault
			}
		case "failover":
			if rec.Failover != nil {
				h.Failovers = append(h.Failovers, *rec.Failover)
			}
		case "cycle":
			if rec.Cycle != nil {
				h.Cycles = append(h.Cycles, *rec.Cycle)
			}
		default:
			return fmt.Errorf("unknown record type %q", rec.Type)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("history: %s: %w", HistoryFile, err)
	}
	for _, id := range order {
		h.Ops = append(h.Ops, *ops[id])
	}
	for _, f := range faults {
		h.Faults = append(h.Faults, f)
	}
	sort.Slice(h.Faults, func(i, j int) bool { return h.Faults[i].ID < h.Faults[j].ID })

	df, err := os.Open(filepath.Join(dir, DeliveriesFile))
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	defer df.Close()
	err = eachLine(df, func(line []byte) error {
		var d Delivery
		if err := json.Unmarshal(line, &d); err != nil {
			return err
		}
		h.Deliveries = append(h.Deliveries, d)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("history: %s: %w", DeliveriesFile, err)
	}
	return h, nil
}

// eachLine calls fn for every non-empty line; a last line cut short (the
// runner was killed mid-write) is ignored.
func eachLine(r io.Reader, fn func([]byte) error) error {
	br := bufio.NewReaderSize(r, 1<<16)
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 && line[len(line)-1] == '\n' {
			if len(line) > 1 {
				if ferr := fn(line[:len(line)-1]); ferr != nil {
					return fmt.Errorf("line %d: %w", n, ferr)
				}
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
