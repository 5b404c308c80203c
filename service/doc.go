// Package service implements the API's Backend (rpc/httpapi.Backend): the
// operations on jobs, collections and routes, and the cluster and admin
// entry points, in terms of the cluster's parts — the meta state, the slot
// leaders reached through forward, and the cluster control plane.
//
// It decides what the HTTP layer only shapes: whether a collection or route
// exists (catching up with the meta leader before answering that one does
// not, so a node that trails a moment never sends a 404 a client would
// believe), which slot a job lives in, the times stamped into commands, how
// a batch is grouped by slot so every slot commits its part as one entry in
// parallel, how per-slot list pages merge into one, and how a collection's
// deletion runs and resumes.
//
// Every error it returns is a *model.Error: internal failures (no leader,
// an unknown outcome, a stopped replica, a timeout) are mapped to the
// domain's kinds here (toModel). It never chooses an HTTP status; the HTTP
// layer does that, and nothing here imports it.
package service
