package httpapi

import "github.com/timemachine-db/timemachine/model"

// The error codes as the tests compare them with error bodies.
const (
	CodeInvalidArgument    = string(model.KindInvalidArgument)
	CodeNotFound           = string(model.KindNotFound)
	CodeConflict           = string(model.KindConflict)
	CodePreconditionFailed = string(model.KindPreconditionFailed)
	CodeTooLarge           = string(model.KindTooLarge)
	CodeOverloaded         = string(model.KindOverloaded)
	CodeUnavailable        = string(model.KindUnavailable)
	CodeInternal           = string(model.KindInternal)
)
