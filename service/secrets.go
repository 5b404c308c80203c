package service

import (
	"maps"

	"github.com/timemachine-db/timemachine/model"
)

// Sealer encrypts a secret before it enters a raft command
// (--secrets-key-file; package secrets implements it). Sealing happens on
// the node that received the request, so the secret travels to the meta
// leader and into every raft log, snapshot and meta copy already sealed.
type Sealer interface {
	Seal(plain string) (string, error)
}

// sealedLen is the length of a sealed value of n plain bytes (the
// sealer's format), so that a sealed value is known to fit the codec's
// field limit before it is proposed.
type sealedLen interface {
	SealedLen(n int) int
}

func (s *Service) seal(what, v string) (string, error) {
	if s.sealer == nil || v == "" {
		return v, nil
	}
	if sl, ok := s.sealer.(sealedLen); ok && sl.SealedLen(len(v)) > model.MaxFieldBytes {
		return "", model.Invalid("%s: %d bytes is too long to be stored encrypted (--secrets-key-file); at most %d bytes", what, len(v), maxSealable(sl))
	}
	out, err := s.sealer.Seal(v)
	if err != nil {
		return "", model.Internal("encrypting %s: %v", what, err)
	}
	return out, nil
}

func maxSealable(sl sealedLen) int {
	n := model.MaxFieldBytes
	for n > 0 && sl.SealedLen(n) > model.MaxFieldBytes {
		n--
	}
	return n
}

// sealCollection seals the collection's signing secret.
func (s *Service) sealCollection(c *model.Collection) error {
	var err error
	c.SigningSecret, err = s.seal("signing_secret", c.SigningSecret)
	return err
}

// sealRoute seals the route's signing secret and the values of its
// sensitive headers (model.SensitiveHeader: the ones never shown).
func (s *Service) sealRoute(r *model.Route) error {
	if s.sealer == nil {
		return nil
	}
	var err error
	if r.SigningSecret, err = s.seal("signing_secret", r.SigningSecret); err != nil {
		return err
	}
	if len(r.Headers) > 0 {
		h := maps.Clone(r.Headers)
		for k, v := range h {
			if model.SensitiveHeader(k) {
				if h[k], err = s.seal("headers."+k, v); err != nil {
					return err
				}
			}
		}
		r.Headers = h
	}
	return nil
}
