package httpapi

import (
	"github.com/valyala/fasthttp"

	"github.com/timemachine-db/timemachine/model"
)

// The gossip keyring endpoints (docs/operations.md#rotating-the-gossip-key):
// GET /v1/admin/gossip/keys lists the keys every member holds (by
// fingerprint); POST {"op":"install|use|remove","key":"<base64>"} changes
// them on every member through serf's key manager.

var gossipKeyFields = newFieldSet([]string{"op", "key"}, nil)

func (s *Server) gossipKeys(r *request) {
	s.gossipKeyOp(r, model.GossipKeyList, "")
}

func (s *Server) changeGossipKeys(r *request) {
	b, e := body(r.ctx)
	if e != nil {
		writeError(r.ctx, e)
		return
	}
	o, e := decodeObject("request body", b)
	if e != nil {
		writeError(r.ctx, e)
		return
	}
	if e := gossipKeyFields.check("", o); e != nil {
		writeError(r.ctx, e)
		return
	}
	var op, key string
	if raw, ok := o.field("op"); ok {
		op, e = str("op", raw)
	}
	if e == nil {
		if raw, ok := o.field("key"); ok {
			key, e = str("key", raw)
		}
	}
	if e == nil {
		switch op {
		case model.GossipKeyInstall, model.GossipKeyUse, model.GossipKeyRemove:
			if key == "" {
				e = model.Invalid(`key is missing: send {"op":%q,"key":"<base64 of 16, 24 or 32 bytes>"}`, op)
			}
		default:
			e = model.Invalid(`op: must be "install", "use" or "remove", got %q`, clip(op))
		}
	}
	if e != nil {
		writeError(r.ctx, e)
		return
	}
	s.gossipKeyOp(r, op, key)
}

func (s *Server) gossipKeyOp(r *request, op, key string) {
	ctx, cancel := s.backendCtx()
	kr, err := s.b.GossipKeys(ctx, op, key)
	cancel()
	if err != nil {
		s.fail(r, err)
		return
	}
	if kr == nil {
		kr = &model.GossipKeyring{}
	}
	// Maps render as {} rather than null: clients iterate them.
	if kr.Keys == nil {
		kr.Keys = map[string]int{}
	}
	if kr.PrimaryKeys == nil {
		kr.PrimaryKeys = map[string]int{}
	}
	s.writeValue(r, fasthttp.StatusOK, kr)
}
