//go:build !linux

package promtext

// AddProcess adds nothing outside Linux: the process_* families read
// /proc.
func (r *Registry) AddProcess() {}
