package httpapi

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/timemachine-db/timemachine/model"
	"github.com/valyala/fasthttp"
)

// The cluster and admin endpoints: /v1/cluster, /v1/admin/….

// writeValue answers with v encoded by encoding/json (admin answers are
// small and rare, so reflection is fine).
func (s *Server) writeValue(r *request, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		s.fail(r, model.Internal("encoding the answer: %v", err))
		return
	}
	writeJSON(r.ctx, status, b)
}

// cluster is GET /v1/cluster.
func (s *Server) cluster(r *request) {
	ctx, cancel := s.backendCtx()
	info, err := s.b.Cluster(ctx)
	cancel()
	if err != nil {
		s.fail(r, err)
		return
	}
	if info == nil {
		info = &model.ClusterInfo{}
	}
	// Lists render as [] rather than null: clients iterate them.
	out := *info
	if out.Nodes == nil {
		out.Nodes = []model.NodeInfo{}
	}
	out.Slots = append([]model.SlotInfo{}, out.Slots...)
	for i := range out.Slots {
		if out.Slots[i].Replicas == nil {
			out.Slots[i].Replicas = []string{}
		}
	}
	s.writeValue(r, fasthttp.StatusOK, &out)
}

// rebalance is POST /v1/admin/rebalance[?dry_run=true].
func (s *Server) rebalance(r *request) {
	dry := false
	args := r.ctx.QueryArgs()
	if args.Has("dry_run") {
		v := string(args.Peek("dry_run"))
		if v == "" {
			dry = true
		} else {
			b, err := strconv.ParseBool(v)
			if err != nil {
				writeError(r.ctx, model.Invalid("dry_run: must be true or false, got %q", clip(v)))
				return
			}
			dry = b
		}
	}
	ctx, cancel := s.backendCtx()
	moves, err := s.b.Rebalance(ctx, dry)
	cancel()
	if err != nil {
		s.fail(r, err)
		return
	}
	if moves == nil {
		moves = []model.Move{}
	}
	s.writeValue(r, fasthttp.StatusOK, struct {
		Moves  []model.Move `json:"moves"`
		DryRun bool         `json:"dry_run"`
	}{moves, dry})
}

// compact is POST /v1/admin/compact.
func (s *Server) compact(r *request) {
	ctx, cancel := s.backendCtx()
	res, err := s.b.Compact(ctx)
	cancel()
	if err != nil {
		s.fail(r, err)
		return
	}
	out := make([]model.CompactResult, len(res))
	copy(out, res)
	for i := range out {
		if out[i].TookMs == 0 && out[i].Took > 0 {
			out[i].TookMs = out[i].Took.Milliseconds()
		}
	}
	s.writeValue(r, fasthttp.StatusOK, struct {
		Results []model.CompactResult `json:"results"`
	}{out})
}

var transferFields = newFieldSet([]string{"to"}, nil)

// checkNodeID validates a node id from a path or body. Node ids are the
// node package's business (derived from host names by default), so this
// only refuses what cannot be one.
func checkNodeID(what, id string) *model.Error {
	if id == "" || len(id) > 255 {
		return model.Invalid("%s: must be a node id (1 to 255 characters), got %q", what, clip(id))
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c <= ' ' || c == 0x7f || c == '/' {
			return model.Invalid("%s: %q is not a node id (%s at byte %d)", what, clip(id), quoteByte(id, i), i)
		}
	}
	return nil
}

// transferSlot is POST /v1/admin/slots/{n}/transfer {"to":"n2"}.
func (s *Server) transferSlot(r *request) {
	n, err := strconv.Atoi(r.params[0])
	if err != nil || n < 0 || r.params[0][0] == '+' {
		writeError(r.ctx, model.Invalid("slot: must be a non-negative integer, got %q", clip(r.params[0])))
		return
	}
	b, e := body(r.ctx)
	if e != nil {
		writeError(r.ctx, e)
		return
	}
	if len(bytes.TrimSpace(b)) == 0 {
		writeError(r.ctx, model.Invalid(`to is missing: send {"to":"<node id>"}, the node that should lead slot %d`, n))
		return
	}
	o, e := decodeObject("request body", b)
	if e != nil {
		writeError(r.ctx, e)
		return
	}
	if e := transferFields.check("", o); e != nil {
		writeError(r.ctx, e)
		return
	}
	raw, ok := o.field("to")
	if !ok {
		writeError(r.ctx, model.Invalid(`to is missing: send {"to":"<node id>"}, the node that should lead slot %d`, n))
		return
	}
	to, e := str("to", raw)
	if e == nil {
		e = checkNodeID("to", to)
	}
	if e != nil {
		writeError(r.ctx, e)
		return
	}
	ctx, cancel := s.backendCtx()
	res, err := s.b.TransferSlot(ctx, n, to)
	cancel()
	if err != nil {
		s.fail(r, err)
		return
	}
	s.writeValue(r, fasthttp.StatusOK, res)
}

// drainNode is POST /v1/admin/nodes/{id}/drain.
func (s *Server) drainNode(r *request) {
	id := r.params[0]
	if e := checkNodeID("node id", id); e != nil {
		writeError(r.ctx, e)
		return
	}
	ctx, cancel := s.backendCtx()
	res, err := s.b.DrainNode(ctx, id)
	cancel()
	if err != nil {
		s.fail(r, err)
		return
	}
	s.writeValue(r, fasthttp.StatusOK, res)
}

// removeNode is DELETE /v1/admin/nodes/{id}.
func (s *Server) removeNode(r *request) {
	id := r.params[0]
	if e := checkNodeID("node id", id); e != nil {
		writeError(r.ctx, e)
		return
	}
	force, e := boolArg(r.ctx.QueryArgs(), "force")
	if e != nil {
		writeError(r.ctx, e)
		return
	}
	ctx, cancel := s.backendCtx()
	_, err := s.b.RemoveNode(ctx, id, force)
	cancel()
	if err != nil {
		s.fail(r, err)
		return
	}
	writeEmpty(r.ctx) // like every DELETE: 204
}

// boolArg reads an optional boolean query argument ("?force" alone is
// true).
func boolArg(args *fasthttp.Args, name string) (bool, *model.Error) {
	if !args.Has(name) {
		return false, nil
	}
	v := string(args.Peek(name))
	if v == "" {
		return true, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, model.Invalid("%s: must be true or false, got %q", name, clip(v))
	}
	return b, nil
}
