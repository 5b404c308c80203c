//go:build !unix

package storage

// statfsFree is not available here: the disk watch stays off.
var statfsFree func(dir string) (avail, total uint64, err error)
