//go:build unix

package storage

import "syscall"

// statfsFree returns the bytes an unprivileged writer may still use on
// dir's file system, and its size: the disk watch's reading
// (diskspace.go).
func statfsFree(dir string) (avail, total uint64, err error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, 0, err
	}
	return st.Bavail * uint64(st.Bsize), st.Blocks * uint64(st.Bsize), nil
}
