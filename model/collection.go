package model

// DefaultCollection always exists: jobs can be created in it without
// configuring anything, and it cannot be deleted.
const DefaultCollection = "default"

// Collection is a namespace of jobs with defaults. Zero fields are unset and
// take the built-in defaults.
type Collection struct {
	Name              string      `json:"name"`
	Retry             RetryPolicy `json:"retry"`
	CallbackTimeoutMs int64       `json:"callback_timeout_ms"`
	RetentionMs       int64       `json:"retention_ms"`
	SigningSecret     string      `json:"signing_secret"`
	Deleting          bool        `json:"deleting"`
	CreatedAt         int64       `json:"created_at"`
	UpdatedAt         int64       `json:"updated_at"`
}

// EffectiveRetry is the collection's policy with defaults filled in.
func (c *Collection) EffectiveRetry() RetryPolicy { return c.Retry.Or(DefaultRetryPolicy) }

// EffectiveTimeoutMs is the callback timeout with the default filled in.
func (c *Collection) EffectiveTimeoutMs() int64 {
	if c.CallbackTimeoutMs > 0 {
		return c.CallbackTimeoutMs
	}
	return DefaultCallbackTimeoutMs
}

// EffectiveRetentionMs is the retention with the default filled in.
func (c *Collection) EffectiveRetentionMs() int64 {
	if c.RetentionMs > 0 {
		return c.RetentionMs
	}
	return DefaultRetentionMs
}

// Route is a named webhook target, resolved at fire time.
type Route struct {
	Name          string            `json:"name"`
	WebhookURL    string            `json:"webhook_url"`
	Headers       map[string]string `json:"headers"`
	SigningSecret string            `json:"signing_secret"`
	TimeoutMs     int64             `json:"timeout_ms"`
	CreatedAt     int64             `json:"created_at"`
	UpdatedAt     int64             `json:"updated_at"`
}
