//go:build !linux

package resp

// WatchHangup: see hangup_linux.go. Elsewhere a blocked client's close is
// noticed when its wait ends.
func (c *Conn) WatchHangup() (hung <-chan struct{}, stop func()) { return nil, func() {} }
