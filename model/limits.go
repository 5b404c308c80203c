package model

import "time"

// The size limits of the contract (docs/api.md#conventions) and of this
// implementation. Validation refuses anything beyond them, and the codec
// bounds what it decodes by them, so both always agree.
const (
	MaxNameLen        = 64   // collection and route names
	MaxIDLen          = 255  // job ids
	MaxNodeIDLen      = 255  // node ids named in admin requests
	MaxURLLen         = 2048 // callback_url, webhook_url
	MaxBatch          = 1000 // jobs in one POST
	MaxListLimit      = 1000 // jobs in one list page
	DefaultListLimit  = 100
	MaxRouteHeaders   = 64
	MaxHeaderNameLen  = 256
	MaxHeaderValueLen = 8 << 10

	// MinSecretBytes and MaxSecretBytes bound a signing secret's key, as
	// decoded from its base64; the whole "whsec_…" string is at most
	// MaxSecretLen bytes.
	MinSecretBytes = 24
	MaxSecretBytes = 64
	SecretPrefix   = "whsec_"
	MaxSecretLen   = len(SecretPrefix) + (MaxSecretBytes+2)/3*4

	// MaxLastErrorLen bounds a job's last_error as the slot leader writes
	// it (a callback's answer is cut to a snippet well below it).
	MaxLastErrorLen = 2 << 10

	// DefaultMaxMetaBytes is the default bound on a job's compacted meta
	// (--max-meta-bytes); MaxMetaBytesLimit is the largest a node accepts
	// for that flag, and what the codec allows a meta to be.
	DefaultMaxMetaBytes = 64 << 10
	MaxMetaBytesLimit   = 16 << 20

	// MaxTriggerMs is 10000-01-01T00:00:00Z: RFC 3339 has four-digit years.
	MaxTriggerMs = 253402300800000

	// MaxFieldBytes bounds every string field the codec decodes (ids,
	// names, URLs, header names and values, secrets, last errors, node
	// addresses): at least the longest string validation accepts.
	MaxFieldBytes = 8 << 10
)

// Duration bounds of the API's duration fields.
const (
	MinCallbackTimeout = time.Millisecond
	MaxCallbackTimeout = time.Hour
	MinRetention       = time.Second
	MaxRetention       = 10 * 365 * 24 * time.Hour
	MinRetryInterval   = time.Millisecond
)

// Route delivery control bounds (docs/api.md#route-delivery-control).
const (
	MaxRatePerSecond = 1_000_000
	MinRatePerSecond = 0.001 // one delivery every 1000 s
	MaxRateBurst     = 1_000_000
	MaxRouteInFlight = 100_000
	MaxBatchJobs     = 1000
	MaxBatchWait     = 10 * time.Second
	DefaultBatchJobs = 100
)
