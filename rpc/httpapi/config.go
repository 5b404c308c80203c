package httpapi

import (
	"github.com/valyala/fasthttp"

	"github.com/timemachine-db/timemachine/model"
)

// What the collection and route endpoints share.

// checkBodyName refuses a "name" member that contradicts the path.
func checkBodyName(o object, name string) *model.Error {
	raw, ok := o.field("name")
	if !ok {
		return nil
	}
	n, e := str("name", raw)
	if e != nil {
		return e
	}
	if n != name {
		return model.Invalid("name: the body says %q but the path says %q; the path decides, so leave it out or make them match", clip(n), name)
	}
	return nil
}

// secretField reads an optional signing_secret ("" or null: none).
func secretField(o object) (string, *model.Error) {
	raw, ok := o.field("signing_secret")
	if !ok {
		return "", nil
	}
	sec, e := str("signing_secret", raw)
	if e != nil || sec == "" {
		return "", e
	}
	return sec, checkSecret("signing_secret", sec)
}

func createdStatus(created bool) int {
	if created {
		return fasthttp.StatusCreated
	}
	return fasthttp.StatusOK
}
