package model

// GossipKeyring is what the gossip keyring admin calls answer
// (GET/POST /v1/admin/gossip/keys): which keys the cluster's members hold.
// Keys are shown by fingerprint ("sha256:" and the first 16 hex digits of
// the key's SHA-256), never themselves: the answer may end up in a
// terminal's scrollback or a log.
type GossipKeyring struct {
	// Keys maps each installed key's fingerprint to the number of members
	// that hold it; PrimaryKeys the same for the key members encrypt with.
	Keys        map[string]int `json:"keys"`
	PrimaryKeys map[string]int `json:"primary_keys"`
	// Nodes is the number of members asked, Responses of those that
	// answered; Errors holds the members that failed and why.
	Nodes     int               `json:"nodes"`
	Responses int               `json:"responses"`
	Errors    map[string]string `json:"errors,omitempty"`
}

// Gossip keyring operations (POST /v1/admin/gossip/keys {"op","key"}).
const (
	GossipKeyList    = "list"
	GossipKeyInstall = "install"
	GossipKeyUse     = "use"
	GossipKeyRemove  = "remove"
)
