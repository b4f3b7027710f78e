//go:build !linux

package store

import "os"

// datasync is the floor of a durable commit (fsync where fdatasync is
// not available).
func datasync(f *os.File) error { return f.Sync() }
